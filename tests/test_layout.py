"""The package's folder tree is its architecture: layers that no import climbs, no cycles, short
functions, and module names that say what they hold."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "annotated_transformer"

# Lowest first. A module may import its own layer and the layers before it, never a later one.
# "top": the modules beside the subpackages (translator, pretrained, variations, ...). The exports
# build on the Translator, so they stand above them, and the command line uses them all.
LAYERS = [
    "util", "model", "data", "runs", "decoding", "evaluation", "training", "top", "exports", "cli"
]  # fmt: skip
# Subpackages that are applications, not library layers (no "Layer" docstring): the command line.
TOP_PACKAGES = ["cli"]
# Old paths kept for one release: each is the module it moved to, so it is in that one's layer.
MOVED = {"ct2_export": "exports", "hf_export": "exports", "onnx_export": "exports"}
# `python -m annotated_transformer` is the command line.
BESIDE = {**MOVED, "__main__": "cli"}
MAX_FUNCTION_LINES = 60
# Folders of the package split into a module per concern (issue 46): none of their modules, the
# files of their subfolders included, is longer than MAX_MODULE_LINES.
SPLIT_BY_CONCERN = ["training", "cli"]
MAX_MODULE_LINES = 400


def modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def layer(module: str) -> str:
    """The layer of a module: its subpackage, or "top" for the modules beside the subpackages."""
    parts = module.split(".")
    if len(parts) == 2 and parts[1] in BESIDE:
        return BESIDE[parts[1]]
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else "top"


def imports(path: Path) -> set[str]:
    """The package modules `path` imports, at its top or inside functions."""
    found = set()
    known = modules()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from annotated_transformer.data import vocab` imports the module data.vocab
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        found |= {name for name in names if name in known}
    return found


def test_the_layers_are_the_subpackages() -> None:
    found = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert set(TOP_PACKAGES) <= found
    subpackages = sorted(found - set(TOP_PACKAGES))
    assert subpackages == sorted(name for name in LAYERS if name not in ("top", *TOP_PACKAGES))
    for name in subpackages:
        doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text()))
        assert doc and "Layer" in doc, (
            f"{name}/__init__.py: a docstring naming its layer and chapters"
        )


def test_no_import_climbs_a_layer() -> None:
    climbs = []
    for name, path in modules().items():
        if name == "annotated_transformer":
            continue
        for target in imports(path):
            if target != "annotated_transformer" and (
                LAYERS.index(layer(target)) > LAYERS.index(layer(name))
            ):
                climbs.append(f"{name} ({layer(name)}) imports {target} ({layer(target)})")
    assert not climbs, "\n".join(climbs)


# Reading a trained model goes through `runs`, never through the trainer (issue 33).
READERS = ["translator", "pretrained", "exports.onnx", "exports.ct2", "exports.hf"]


def reachable(start: str) -> set[str]:
    """Every package module that `start` imports, directly or through other modules."""
    known, seen, todo = modules(), set(), [start]
    while todo:
        name = todo.pop()
        for target in imports(known[name]) - seen - {"annotated_transformer"}:
            seen.add(target)
            todo.append(target)
    return seen


@pytest.mark.parametrize("reader", READERS)
def test_reading_a_model_never_imports_training(reader: str) -> None:
    reached = reachable(f"annotated_transformer.{reader}")
    found = sorted(name for name in reached if layer(name) == "training")
    assert not found, f"{reader} reaches the trainer: {found}"
    assert "annotated_transformer.runs.saved_run" in reachable("annotated_transformer.translator")


def test_no_import_cycle() -> None:
    graph = {
        name: imports(path) - {name, "annotated_transformer"} for name, path in modules().items()
    }
    # Packages' __init__ files import nothing, so an edge to a package is not a path through it.
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                pytest.fail("import cycle: " + " -> ".join([*stack[stack.index(nxt) :], nxt]))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_no_function_is_longer_than_60_lines() -> None:
    long = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {lines} lines (line {node.lineno})")
    assert not long, "\n".join(long)


@pytest.mark.parametrize("folder", SPLIT_BY_CONCERN)
def test_no_module_of_a_folder_split_by_concern_is_longer_than_400_lines(folder: str) -> None:
    paths = sorted((PACKAGE / folder).rglob("*.py"))
    assert paths, f"{folder}: no modules"
    long = []
    for path in paths:
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            long.append(f"{path.relative_to(PACKAGE)}: {lines} lines")
    assert not long, "\n".join(long)


def test_no_two_modules_share_a_short_name() -> None:
    short: dict[str, list[str]] = {}
    for name in modules():
        if name.count(".") >= 1 and not name.endswith("__main__"):
            short.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    shared = {k: v for k, v in short.items() if len(v) > 1}
    assert not shared, shared


def test_the_package_ships_its_type_marker() -> None:
    assert (PACKAGE / "py.typed").exists()
