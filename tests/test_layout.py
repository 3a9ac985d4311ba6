"""The layout of the package: layers that import only downwards, small
modules.

The rule is written in ``CONTRIBUTING.md`` ("The layout of the package"):
each subpackage is a layer, and a module imports from its own layer and the
layers below it only, inside functions too. The estimators, the plots and
the command line at the top may import everything.
"""

import ast
from pathlib import Path

import pytest

import sklearn_kernelpool

PACKAGE = Path(sklearn_kernelpool.__file__).parent
NAME = "sklearn_kernelpool"

#: The layers, from the bottom. A top-level module not named here is of the
#: top layer (the estimators, the command line).
LAYERS = {
    "_utils": 0,
    "kernels": 0,
    "_engine": 1,
    "_binned": 1.5,  # layer 1, above the engines: it imports them, never they it
    "_held_out": 2,
    "_widths": 3,
    "_search": 4,
    "_inference": 5,
    "_estimator": 6,
    "_selection": 7,
    "_plotting": 8,
}
TOP = 9
#: Old module paths kept for the pickles of earlier releases: one import.
SHIMS = {
    "_pooling",
    "_binned_pool",
    "_grid_pool",
    "_kernel_forms",
    "_significance_result",
}
#: The package's entry points at the top: its public names, the command
#: line and the types skops may trust.
ENTRY_POINTS = {"__init__", "__main__", "_main", "_skops"}
#: The most modules the top level holds.
MAX_TOP_MODULES = 18

MAX_LINES = 500
MAX_CODE_LINES = 450


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _dotted(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(dotted):
    parts = dotted.split(".")
    if len(parts) < 2:
        return TOP  # the package's __init__
    return LAYERS.get(parts[1], TOP)


def _imports(path):
    """Every module of the package that ``path`` imports, inside functions
    too, as dotted names."""
    dotted = _dotted(path)
    package = dotted if path.name == "__init__.py" else dotted.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if not module.startswith(NAME):
                continue
            for alias in node.names:
                candidate = f"{module}.{alias.name}"
                as_module = PACKAGE.parent / (candidate.replace(".", "/") + ".py")
                found.add(candidate if as_module.exists() else module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(NAME))
    return found


def test_no_module_imports_a_higher_layer():
    wrong = []
    for path in _modules():
        dotted = _dotted(path)
        if dotted.split(".")[-1] in SHIMS and dotted.count(".") == 1:
            continue
        for module in _imports(path):
            if _layer(module) > _layer(dotted):
                wrong.append(f"{dotted} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_every_subpackage_is_a_known_layer_and_says_what_it_holds():
    for path in PACKAGE.iterdir():
        if path.is_dir() and (path / "__init__.py").exists():
            assert path.name in LAYERS, path.name
            doc = ast.get_docstring(ast.parse((path / "__init__.py").read_text()))
            assert doc and "import" in doc, f"{path.name}: say what it may import"


def _code_lines(path):
    """Lines that are not blank, comments or docstrings."""
    tree = ast.parse(path.read_text())
    lines = path.read_text().splitlines()
    skip = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                skip.update(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(
        1
        for number, line in enumerate(lines, 1)
        if number not in skip and line.strip() and not line.strip().startswith("#")
    )


@pytest.mark.parametrize("path", _modules(), ids=lambda p: _dotted(p))
def test_modules_are_small(path):
    assert len(path.read_text().splitlines()) <= MAX_LINES
    assert _code_lines(path) <= MAX_CODE_LINES


def _public_estimator_modules():
    from sklearn.base import BaseEstimator

    modules = set()
    for name in sklearn_kernelpool.__all__:
        value = getattr(sklearn_kernelpool, name)
        if isinstance(value, type) and issubclass(value, BaseEstimator):
            module = value.__module__
            assert module.count(".") == 1, f"{name} is not defined at the top"
            modules.add(module.rpartition(".")[2])
    return modules


def test_the_top_level_holds_the_estimators_kernels_shims_and_entry_points():
    top = {path.stem for path in PACKAGE.glob("*.py")}
    allowed = _public_estimator_modules() | {"kernels"} | SHIMS | ENTRY_POINTS
    assert top <= allowed, f"modules to move into a layer: {sorted(top - allowed)}"
    assert len(top) <= MAX_TOP_MODULES


def _import_graph():
    """Every module of the package and the modules of the package it
    imports, at the top of the module or inside functions."""
    graph = {}
    for path in _modules():
        dotted = _dotted(path)
        graph[dotted] = {module for module in _imports(path) if module != dotted}
    return graph


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for child in sorted(graph.get(node, ())):
            if child not in graph:
                continue
            if child not in index:
                visit(child)
                low[node] = min(low[node], low[child])
            elif child in on_stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles():
    assert not _cycles(_import_graph())


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert not _cycles({"a": {"b"}, "b": set()})


def test_the_old_paths_of_pickled_classes_are_silent_shims():
    for name in SHIMS:
        source = (PACKAGE / f"{name}.py").read_text()
        imports = [
            node
            for node in ast.parse(source).body
            if isinstance(node, (ast.Import, ast.ImportFrom))
        ]
        assert len(imports) == 1


#: A function reads top to bottom: at most this many lines after its docstring
#: (a longer one is split into named steps).
MAX_FUNCTION_LINES = 60


def _function_lengths(path):
    """``(qualified name, length)`` of every function and method of ``path``,
    nested ones too: the lines after the docstring (from the first statement
    without one) to the last line."""
    lengths = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                body = child.body
                if ast.get_docstring(child, clean=False) is not None:
                    start = body[0].end_lineno + 1
                else:
                    start = body[0].lineno
                lengths.append((name, child.end_lineno - start + 1))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text()), "")
    return lengths


def test_functions_read_top_to_bottom():
    long = []
    for path in _modules():
        for name, length in _function_lengths(path):
            key = f"{_dotted(path)}:{name}"
            if length > MAX_FUNCTION_LINES:
                long.append(f"{key}:{length}")
    assert not long, (
        f"Functions of more than {MAX_FUNCTION_LINES} lines; split them into "
        "named steps:\n" + "\n".join(long)
    )
