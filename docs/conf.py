"""Sphinx configuration of the sklearn-kernelpool documentation."""

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

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "within_subsection_order": "FileNameSortKey",
}

html_theme = "pydata_sphinx_theme"
html_title = "sklearn-kernelpool"
html_theme_options = {"navigation_with_keys": False}
exclude_patterns = ["_build", "auto_examples/*.ipynb"]
plot_include_source = True
plot_html_show_formats = False
plot_html_show_source_link = False
nitpicky = False
