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
    "util", "model", "data", "runs", "decoding", "evaluation", "training", "top", "exports", "cli",
    "book",
]  # fmt: skip
# Subpackages that are applications, not library layers (no "Layer" docstring): the command line,
# and what only the book's chapters use.
TOP_PACKAGES = ["cli", "book"]
# Old paths kept for one release: each is the module it moved to, so it is in that one's layer.
MOVED = {
    "ct2_export": "exports", "hf_export": "exports", "onnx_export": "exports",
    "notebook": "book", "figures": "book", "exercises": "book",
}  # fmt: skip
# Old paths inside a layer, kept for one release (issue 62): `averaging` moved down to `runs`;
# `guards` was split among the modules that own its pieces.
MOVED_WITHIN = {"training.averaging", "training.guards"}
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
    """The package modules `path` imports, at its top or inside functions; not those under
    `if TYPE_CHECKING:`, which never run (names for annotations only)."""
    found = set()
    known = modules()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    unrun = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for statement in node.body
        for inner in ast.walk(statement)
    }
    for node in ast.walk(tree):
        if id(node) in unrun:
            continue
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
        old_path = (name.count(".") == 1 and name.rsplit(".", 1)[-1] in MOVED) or name.split(
            ".", 1
        )[-1] in MOVED_WITHIN  # (for one release)
        if name.count(".") >= 1 and not name.endswith("__main__") and not old_path:
            short.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    shared = {k: v for k, v in short.items() if len(v) > 1}
    assert not shared, shared


def test_the_package_ships_its_type_marker() -> None:
    assert (PACKAGE / "py.typed").exists()


def modules_using(pattern: str) -> list[str]:
    """The modules of the package whose code (comments aside) matches `pattern`."""
    import re

    found = []
    for name, path in modules().items():
        code = "\n".join(line.split("#", 1)[0] for line in path.read_text("utf-8").splitlines())
        if re.search(pattern, code):
            found.append(name)
    return found


def test_the_package_has_one_lock() -> None:
    """Training's train.lock, an output folder's lock and the download cache's all take
    `util.locks.hold` (issue 59): `fcntl.flock` appears in that module alone."""
    pattern = r"\bfcntl\.flock\b|\bimport fcntl\b"
    assert modules_using(pattern) == ["annotated_transformer.util.locks"]


def test_the_package_has_one_sha256_helper() -> None:
    """Records, exports, the shipped model's SHA256SUMS, downloads and prepared shards all hash
    with `util.atomic.sha256` (a file) or `sha256_bytes` (issue 59)."""
    pattern = r"\bhashlib\.(sha256|file_digest|new)\b"
    assert modules_using(pattern) == ["annotated_transformer.util.atomic"]


def test_no_module_imports_another_modules_private_name() -> None:
    """A helper that another module uses has a public name where it lives (issue 59); the
    chapters, which teach the package, import only public names too."""
    import json

    def private(tree: ast.AST, where: str) -> list[str]:
        return [
            f"{where}: from {node.module} import {alias.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE.name)
            for alias in node.names
            if alias.name.startswith("_") and not alias.name.startswith("__")
        ]

    found = []
    for name, path in modules().items():
        found += private(ast.parse(path.read_text(encoding="utf-8")), name)
    for notebook in sorted((PACKAGE.parents[1] / "book").glob("*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            code = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
            lines = [line for line in code.splitlines() if not line.startswith(("%", "!"))]
            found += private(ast.parse("\n".join(lines)), f"{notebook.name}, cell {i}")
    assert not found, "\n".join(found)


def _catches(handler: ast.ExceptHandler, names: set[str]) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return handler.type is None or any(isinstance(k, ast.Name) and k.id in names for k in kinds)


def test_the_command_line_knows_errors_by_type() -> None:
    """In cli/, no `except ValueError` or `except Exception` catches what the package raises:
    its errors are caught by their classes (`util.errors`), and entry._run's last handler alone
    takes any other exception, as a bug (issue 59). A handler of ValueError may only guard
    calls that are not the package's (`int(text)`, `json.loads`, `os.fstat`, ...)."""
    broad, found = {"ValueError", "Exception", "BaseException"}, []
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        ours = {  # the names this module imports from the package
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE.name)
            for alias in node.names
        }
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            for node in ast.walk(function):
                if not isinstance(node, ast.Try):
                    continue
                for handler in node.handlers:
                    if not _catches(handler, broad):
                        continue
                    if path.name == "entry.py" and function.name == "_run":
                        found.append("the bug handler")
                        continue
                    called = {
                        n.id for stmt in node.body for n in ast.walk(stmt)
                        if isinstance(n, ast.Name)
                    }  # fmt: skip
                    if called & ours:
                        found.append(f"{path.name}:{handler.lineno} ({sorted(called & ours)})")
    assert found == ["the bug handler"], found
