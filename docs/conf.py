"""Sphinx configuration of the sklearn-kernelpool documentation."""

import posixpath
from importlib.util import find_spec
from pathlib import Path

from sphinx.errors import ConfigError
from sphinx.util.fileutil import copy_asset

import sklearn_kernelpool

project = "sklearn-kernelpool"
author = "the sklearn-kernelpool developers"
copyright = "2026, the sklearn-kernelpool developers"
version = release = sklearn_kernelpool.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "matplotlib.sphinxext.plot_directive",
    "myst_parser",
    "sphinx_design",
]

autosummary_generate = True
templates_path = ["_templates"]
# The metadata-routing setters are scikit-learn's and documented there.
autodoc_default_options = {
    "members": True,
    "exclude-members": "set_fit_request,set_predict_request,set_score_request",
}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

# Offline builds: no inventories are fetched, so cross-references to other
# projects render as plain text.
intersphinx_mapping = {}

# The documentation works offline: every page loads its scripts, stylesheets
# and fonts from the built site (``python docs/check_offline.py`` checks it).
#
# MathJax 3.2.2 as sphinx-mathjax-offline ships it, served from
# _static/mathjax: the tex-chtml bundle the pages load, and the components it
# loads on demand (its fonts, the TeX extensions, the accessibility tools and
# speech maps of its menu, the SVG renderer), without the alternative
# combined bundles (15 MB) no page loads.
_MATHJAX_PACKAGE = find_spec("sphinx-mathjax-offline")
if _MATHJAX_PACKAGE is None:
    raise ConfigError(
        "the documentation serves MathJax from the built site: install the "
        "docs extra (pip install -e '.[docs]'), which pulls in "
        "sphinx-mathjax-offline"
    )
_MATHJAX_SOURCE = Path(_MATHJAX_PACKAGE.origin).parent / "static" / "mathjax"
_MATHJAX_BUNDLE = "tex-chtml.js"
mathjax_path = f"mathjax/{_MATHJAX_BUNDLE}"


def _unused_mathjax_bundle(path):
    """Tell whether ``path`` is a top-level MathJax file no page loads."""
    path = posixpath.normpath(path)
    return "/" not in path and path.endswith(".js") and path != _MATHJAX_BUNDLE


def _copy_mathjax(app, exception):
    """Copy MathJax into the built site's ``_static/mathjax``."""
    if exception is None and app.builder.format == "html":
        copy_asset(
            _MATHJAX_SOURCE,
            Path(app.outdir) / "_static" / "mathjax",
            excluded=_unused_mathjax_bundle,
            force=True,  # a newer copy replaces the one of an earlier build
        )


def setup(app):
    """Connect the copy of MathJax to the end of the build."""
    app.connect("build-finished", _copy_mathjax)


sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "within_subsection_order": "FileNameSortKey",
    # The computation-times pages load jQuery, DataTables and Bootstrap from
    # CDNs: the examples' pages state their own running time instead.
    "write_computation_times": False,
}

html_theme = "pydata_sphinx_theme"
html_title = "sklearn-kernelpool"
html_theme_options = {"navigation_with_keys": False}
# The computation-times pages that builds before write_computation_times was
# off left in the source tree.
exclude_patterns = [
    "_build",
    "auto_examples/*.ipynb",
    "sg_execution_times.rst",
    "**/sg_execution_times.rst",
]
plot_include_source = True
plot_html_show_formats = False
plot_html_show_source_link = False
nitpicky = False
