"""The extras of pyproject.toml against the install page and the README."""

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
    "optional-dependencies"
]
INSTALL = (ROOT / "docs" / "install.rst").read_text()
README = (ROOT / "README.md").read_text()
# Names the pages give packages whose distribution name differs.
DISPLAY_NAMES = {"torch": "PyTorch"}


def _name(requirement):
    return re.match(r"[A-Za-z0-9._-]+", requirement).group(0)


def _packages(extra, seen=()):
    """The distribution names an extra installs, self-references expanded."""
    names = set()
    for requirement in EXTRAS[extra]:
        self_reference = re.fullmatch(r"sklearn-kernelpool\[(.+)\]", requirement)
        if self_reference:
            for other in self_reference.group(1).split(","):
                if other not in seen:
                    names |= _packages(other.strip(), (*seen, extra))
        else:
            names.add(_name(requirement))
    return names


def _entries():
    """The install page's definition list of extras: name -> its text."""
    entries = {}
    for match in re.finditer(r"^``([\w-]+)``\n((?:    .*\n|\n)+)", INSTALL, re.M):
        entries[match.group(1)] = " ".join(match.group(2).split())
    return entries


def test_the_install_page_lists_every_extra_with_its_packages():
    entries = _entries()
    assert set(entries) == set(EXTRAS)
    for extra in EXTRAS:
        for name in _packages(extra):
            shown = DISPLAY_NAMES.get(name, name)
            assert shown.lower() in entries[extra].lower(), (extra, name)


def test_the_readme_names_every_extra():
    for extra in EXTRAS:
        assert f"`{extra}`" in README, extra


def test_the_test_extra_installs_no_pytorch():
    # The README's test command must stay light: the array API tests run on
    # array-api-strict; PyTorch comes with the array-api extra only.
    assert "torch" not in _packages("test")
    assert {"array-api-compat", "array-api-strict"} <= _packages("test")
    assert "torch" in _packages("array-api")


def test_the_pages_give_the_pinned_pytorch_release():
    (pin,) = [r for r in EXTRAS["array-api"] if _name(r) == "torch"]
    version = pin.partition("==")[2]
    assert version, f"the array-api extra no longer pins PyTorch: {pin}"
    assert f"torch {version}" in INSTALL
    assert f"PyTorch {version}" in README


def test_the_pages_install_from_a_clone():
    assert "not published on the Python Package Index" in INSTALL
    for text in (INSTALL, README):
        # From the clone's directory, never from an index or a URL.
        assert "://" not in text
        assert "index-url" not in text
        assert re.search(r'pip install "?\.', text)
        assert not re.search(r"pip install [\"']?(sklearn|scikit)", text)
