"""The documentation covers the public API and its examples run.

Every public name is in the API reference, every public class and function
has a numpydoc docstring with an Examples section, the user guide's kernel
table matches the registry, and the examples written in the pages run.
"""

import doctest
import inspect
import itertools
import re
from pathlib import Path

import numpy as np
import pytest

import sklearn_kernelpool
from sklearn_kernelpool import kernels
from sklearn_kernelpool.kernels import KERNELS

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _public_names():
    """(module, name) for every name of the two public ``__all__`` lists."""
    for module in (sklearn_kernelpool, kernels):
        for name in module.__all__:
            if not name.startswith("__"):
                yield module, name


def _documented_objects():
    """(qualified name, object) of every public class and function."""
    for module, name in _public_names():
        obj = getattr(module, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            yield f"{module.__name__}.{name}", obj


def _section(doc, title):
    """The body of numpydoc section ``title`` of ``doc``, or None."""
    match = re.search(
        rf"^{title}\n-{{{len(title)}}}\n(.*?)(?=^\w[\w ]*\n-+\n|\Z)",
        doc,
        flags=re.M | re.S,
    )
    return None if match is None else match.group(1)


@pytest.mark.parametrize("name", sorted({name for _, name in _public_names()}), ids=str)
def test_every_public_name_is_in_the_api_reference(name):
    text = (DOCS / "api.rst").read_text()
    assert re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text), name


_OBJECTS = dict(_documented_objects())


@pytest.mark.parametrize("qualname", sorted(_OBJECTS))
def test_public_docstrings_are_numpydoc_with_a_runnable_example(qualname):
    obj = _OBJECTS[qualname]
    doc = inspect.getdoc(obj)
    assert doc, f"{qualname} has no docstring"
    summary = doc.splitlines()[0]
    assert summary.strip() and summary.rstrip().endswith("."), (
        f"{qualname}: the summary line should be one sentence"
    )
    if inspect.isfunction(obj):
        if inspect.signature(obj).parameters:
            assert _section(doc, "Parameters"), f"{qualname}: no Parameters section"
        returns = _section(doc, "Returns") or _section(doc, "Yields")
        assert returns, f"{qualname}: no Returns (or Yields) section"
    examples = _section(doc, "Examples")
    assert examples is not None, f"{qualname}: no Examples section"
    assert ">>> " in examples, f"{qualname}: the Examples run no code"
    # The examples run: they are doctests (--doctest-modules), and parse here.
    assert doctest.DocTestParser().get_examples(examples)


def _kernel_table_rows():
    """(names, formula, support) of the user guide's kernel table."""
    text = (DOCS / "user_guide" / "kernels.rst").read_text()
    table = text[text.index(".. list-table::") :]
    table = table[: table.index("\n\n.. ")]
    rows = re.split(r"^   \* - ", table, flags=re.M)[2:]  # skip the header
    out = []
    for row in rows:
        cells = [cell.strip() for cell in re.split(r"^     - ", row, flags=re.M)]
        names = re.findall(r"``(\w+)``", cells[0])
        out.append((names, cells[1], cells[2]))
    return out


def test_the_kernel_table_lists_every_kernel_and_alias_once():
    rows = _kernel_table_rows()
    names = [name for row_names, _, _ in rows for name in row_names]
    assert sorted(names) == sorted(KERNELS)
    canonical = {kernel.name for kernel in KERNELS.values()}
    assert [row_names[0] for row_names, _, _ in rows] == [
        name for name in dict.fromkeys(k.name for k in KERNELS.values())
    ]
    assert {row_names[0] for row_names, _, _ in rows} == canonical


def test_the_kernel_table_groups_aliases_and_gives_the_support():
    for row_names, _, support in _kernel_table_rows():
        kernel = KERNELS[row_names[0]]
        assert {KERNELS[name].name for name in row_names} == {kernel.name}
        assert set(kernel.aliases) == set(row_names[1:])
        expected = "unbounded" if kernel.support == np.inf else f"{kernel.support:g}"
        assert support == expected, row_names[0]


def test_the_kernel_table_formulas_match_the_functions():
    # The formula column, read as Python, gives the kernel's values.
    x = np.linspace(-2.5, 2.5, 101)
    to_python = [
        (r":math:`", ""),
        (r"`", ""),
        (r"\\exp", "np.exp"),
        (r"\\max", "np.maximum"),
        (r"\\cos", "np.cos"),
        (r"\\pi ", "np.pi * "),
        (r"\\cdot", "*"),
        (r"\|x\|", "np.abs(x)"),
        (r"\^", "**"),
    ]
    for row_names, formula, _ in _kernel_table_rows():
        expr = formula
        for pattern, repl in to_python:
            expr = re.sub(pattern, repl, expr)
        condition = re.fullmatch(r"(.*) if (.*) < 1 else 0", expr)
        if condition:
            expr = f"np.where({condition.group(2)} < 1, {condition.group(1)}, 0.0)"
        expr = re.sub(r"np\.maximum\(([^,]*), 0\)", r"np.maximum(\1, 0.0)", expr)
        values = eval(expr, {"np": np, "x": x})  # noqa: S307
        expected = KERNELS[row_names[0]](x)
        np.testing.assert_allclose(values * np.ones_like(x), expected, atol=1e-12)


def test_the_kernel_plot_draws_every_registered_kernel():
    text = (DOCS / "user_guide" / "kernels.rst").read_text()
    assert "names = sorted({kernel.name for kernel in KERNELS.values()})" in text


@pytest.mark.parametrize(
    "page",
    sorted(
        str(path.relative_to(DOCS))
        for path in DOCS.rglob("*.rst")
        if ">>> " in path.read_text()
    ),
)
def test_the_doctests_in_the_pages_pass(page):
    result = doctest.testfile(
        str(DOCS / page),
        module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
    )
    assert result.attempted > 0
    assert result.failed == 0


def test_the_landing_page_example_runs(capsys):
    text = (DOCS / "index.rst").read_text()
    block = text[text.index(".. code-block:: python") :].split("\n", 2)[2]
    code = "\n".join(
        line[4:] for line in block.split("\n.. ")[0].splitlines() if line.strip()
    )
    exec(compile(code, "index.rst", "exec"), {})
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_every_user_guide_page_is_in_the_guide_toctree():
    index = (DOCS / "user_guide.rst").read_text()
    listed = set(re.findall(r"^   (user_guide/\w+)$", index, flags=re.M))
    pages = {f"user_guide/{path.stem}" for path in (DOCS / "user_guide").glob("*.rst")}
    assert listed == pages


# User-guide pages that explain no behaviour a picture would show, with why.
_PAGES_WITHOUT_FIGURE = {
    "numerics": "floating-point rules: underflow, rounding and exact decisions",
    "persistence": "pickling, saving and progress bars",
}


def _plot_blocks(text):
    """The code of every ``.. plot::`` directive of a page."""
    blocks = re.findall(r"^\.\. plot::\n((?:[ \t]*\n|    .*\n)+)", text + "\n", re.M)
    return [
        "\n".join(
            line[4:] for line in block.splitlines() if not line.strip()[:1] == ":"
        )
        for block in blocks
    ]


def _has_figure(text):
    """A page draws a figure: a plot directive, or a gallery example's image."""
    gallery = re.search(
        r"^\.\. (image|figure):: /auto_examples/images/sphx_glr_plot_\w+\.png$",
        text,
        re.M,
    )
    return bool(_plot_blocks(text) or gallery)


_GUIDE_PAGES = sorted(path.stem for path in (DOCS / "user_guide").glob("*.rst"))


@pytest.mark.parametrize("page", _GUIDE_PAGES)
def test_every_user_guide_page_draws_a_figure_or_says_why_not(page):
    text = (DOCS / "user_guide" / f"{page}.rst").read_text()
    if page in _PAGES_WITHOUT_FIGURE:
        assert not _has_figure(text), f"{page} has a figure: drop it from the list"
    else:
        assert _has_figure(text), (
            f"user_guide/{page}.rst has no '.. plot::' directive and no gallery "
            "figure; add one, or list the page in _PAGES_WITHOUT_FIGURE with why"
        )


def test_the_pages_without_figure_exist():
    assert set(_PAGES_WITHOUT_FIGURE) <= set(_GUIDE_PAGES)


def test_the_figure_check_fails_on_a_page_without_one():
    assert not _has_figure("Title\n=====\n\nText only.\n\n.. math::\n\n    x\n")
    assert _has_figure("Text.\n\n.. plot::\n\n    import matplotlib\n")


@pytest.mark.parametrize(
    "page", [page for page in _GUIDE_PAGES if page not in _PAGES_WITHOUT_FIGURE]
)
def test_the_guide_figures_label_their_axes_and_are_introduced(page):
    text = (DOCS / "user_guide" / f"{page}.rst").read_text()
    for code in _plot_blocks(text):
        assert code.strip(), f"{page}: an empty plot directive"
        # A display labels its own axes.
        assert "set_xlabel" in code or "Display.from_estimator" in code, (
            f"{page}: a figure without an x label"
        )
    for match in re.finditer(r"^\.\. plot::\n(?:[ \t]*\n|    .*\n)+", text, re.M):
        after = text[match.end() :].lstrip("\n")
        before = text[: match.start()].rstrip("\n").rsplit("\n\n", 1)[-1]
        caption = after.split("\n\n", 1)[0]
        captioned = (
            bool(caption)
            and not caption.startswith("..")
            and not re.search(r"^[-=~^]{3,}$", caption, re.M)
        )
        introduced = before.endswith(":") or "figure" in before
        assert captioned or introduced, (
            f"{page}: a figure that no text introduces or captions"
        )


def _simple_tables(text):
    """The body rows of every simple table, each row as its list of cells."""
    border = r"=+(?:  +=+)+"
    tables = re.findall(rf"^({border})\n((?:.*\n)+?)^\1\n((?:.*\n)+?)^\1$", text, re.M)
    out = []
    for edge, _, body in tables:
        spans = [m.span() for m in re.finditer("=+", edge)]
        starts = [start for start, _ in spans] + [None]
        rows = [
            [line[a:b].strip() for a, b in itertools.pairwise(starts)]
            for line in body.splitlines()
        ]
        out.append(rows)
    return out


def _list_tables(text):
    """The rows (header included) of every list-table, as lists of cells."""
    out = []
    for table in re.findall(
        r"^\.\. list-table::\n(?:   :.*\n)*\n((?:   .*\n)+)", text, re.M
    ):
        rows = re.split(r"^   \* -(?: |$)", table, flags=re.M)[1:]
        out.append(
            [
                [
                    " ".join(cell.split())
                    for cell in re.split(r"^     -(?: |$)", row, flags=re.M)
                ]
                for row in rows
            ]
        )
    return out


def test_the_performance_tables_have_one_row_per_entry():
    # A simple table renders every line as a row: a line that continues the
    # text of the row above shows as a row of empty cells.
    text = (DOCS / "performance.rst").read_text()
    for rows in _simple_tables(text):
        for cells in rows:
            assert all(cells), (
                f"a wrapped line renders as a row of empty cells: {cells}"
            )
    for rows in _list_tables(text):
        for cells in rows:
            assert len(cells) == len(rows[0]) and all(cells), cells


def test_the_performance_targets_each_have_a_value_and_a_verdict():
    text = (DOCS / "performance.rst").read_text()
    targets = [rows for rows in _list_tables(text) if rows[0][0] == "target"]
    assert len(targets) == 2
    for rows in targets:
        assert rows[0] == ["target", "measured", "verdict"]
        for target, measured, verdict in rows[1:]:
            assert re.search(r"\d", measured), target
            assert verdict in {"met", "missed"}, target


def test_the_table_checks_fail_on_a_wrapped_row():
    wrapped = (
        "==========  ====  ====\n"
        "target      x     ok\n"
        "==========  ====  ====\n"
        "a target    1x    met\n"
        "wrapped on\n"
        "==========  ====  ====\n"
    )
    assert _simple_tables(wrapped)[0] == [
        ["a target", "1x", "met"],
        ["wrapped on", "", ""],
    ]
    listed = (
        ".. list-table::\n   :header-rows: 1\n\n"
        "   * - target\n     - x\n   * -\n     - 1x\n"
    )
    assert _list_tables(listed)[0][1] == ["", "1x"]


def _install_lines():
    """(file, line) of every ``pip install`` in the docs, examples and README."""
    root = DOCS.parent
    paths = [root / "README.md", *sorted((root / "examples").glob("*.py"))]
    generated = {"_build", "auto_examples", "generated"}
    paths += [
        path
        for path in sorted(DOCS.rglob("*.rst"))
        if not generated & set(path.relative_to(DOCS).parts)
    ]
    for path in paths:
        for line in path.read_text().splitlines():
            if "pip install" in line:
                yield path.relative_to(root), line


@pytest.mark.parametrize("where,line", list(_install_lines()), ids=str)
def test_the_package_is_installed_from_a_clone_not_the_index(where, line):
    # The package is not published: it installs from the root of a clone,
    # ``pip install .`` or ``pip install ".[extra]"``.
    assert not re.search(r"pip install\W*sklearn[-_]kernelpool", line, re.I), (
        f"{where}: {line.strip()}"
    )
