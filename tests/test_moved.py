"""Modules that moved keep their old import path for one release, with a `DeprecationWarning`
(issue 46): the old name is the new module itself, so what a user imported, patched or pickled
by the old path is the same object."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# old path -> where it moved (in 0.3.0); the old paths go in 0.4
MOVED = {
    "annotated_transformer.ct2_export": "annotated_transformer.exports.ct2",
    "annotated_transformer.hf_export": "annotated_transformer.exports.hf",
    "annotated_transformer.onnx_export": "annotated_transformer.exports.onnx",
    "annotated_transformer.notebook": "annotated_transformer.book.notebook",
    "annotated_transformer.figures": "annotated_transformer.book.figures",
    "annotated_transformer.exercises": "annotated_transformer.book.exercises",
    "annotated_transformer.training.averaging": "annotated_transformer.runs.averaging",
}
# split among the modules that own its pieces (in 0.3.0): each name there is the new one's object
SPLIT = {"annotated_transformer.training.guards": ["run_folder", "epochs", "distributed", "signals",
                                                   "training_checks"]}  # fmt: skip


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_and_is_the_new_module(old: str, monkeypatch) -> None:
    new = importlib.import_module(MOVED[old])
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {MOVED[old]}"):
        module = importlib.import_module(old)
    assert module is new
    parent, _, short = old.rpartition(".")
    assert getattr(importlib.import_module(parent), short) is new
    name = sorted(n for n in vars(new) if not n.startswith("_") and callable(getattr(new, n)))[0]
    exec(f"from {old} import {name} as found", scope := {})  # the old `from ... import` form
    assert scope["found"] is getattr(new, name)


@pytest.mark.parametrize("old", sorted(SPLIT))
def test_a_split_module_warns_and_each_name_is_its_owners(old: str, monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=f"{old} moved: each name is now in the module"):
        module = importlib.import_module(old)
    package = old.rsplit(".", 1)[0]
    owners = [importlib.import_module(f"{package}.{owner}") for owner in SPLIT[old]]
    for name in module.__all__:  # the very object, from the module that owns it now
        assert any(getattr(owner, name, None) is getattr(module, name) for owner in owners), name


def test_the_new_paths_do_not_warn() -> None:
    code = "import warnings; warnings.simplefilter('error')\n" + "".join(
        f"import {new}\n" for new in MOVED.values()
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_nothing_of_ours_uses_an_old_path() -> None:
    """The package, its chapters, benchmarks, tools and README use the new paths only; the tests
    import by them (they may name an old path as a string: this file, test_walk.py)."""
    old = re.compile(
        r"annotated_transformer\.((ct2|hf|onnx)_export|notebook|figures|exercises"
        r"|training\.(averaging|guards))\b"
        r"|from annotated_transformer import .*(_export|notebook|figures|exercises)"
    )
    imports = re.compile(  # `import OLD`, `from OLD import ...`, `from PARENT import OLD`
        r"^\s*(import|from) annotated_transformer\.((ct2|hf|onnx)_export|notebook|figures"
        r"|exercises|training\.(averaging|guards))\b"
        r"|^\s*from annotated_transformer import .*\b((ct2|hf|onnx)_export|notebook|figures"
        r"|exercises)\b"
        r"|^\s*from annotated_transformer\.training import .*\b(averaging|guards)\b",
        re.MULTILINE,
    )
    shims = {ROOT / "src" / (name.replace(".", "/") + ".py") for name in [*MOVED, *SPLIT]}
    files = [*(ROOT / "src").rglob("*.py"), *(ROOT / "book").glob("*.ipynb")]
    files += [*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "tools").glob("*.py")]
    found = [
        f"{path.relative_to(ROOT)}: {match.group()}"
        for path in sorted(set(files) - shims)
        for match in old.finditer(path.read_text(encoding="utf-8"))
    ]
    found += [
        f"{path.relative_to(ROOT)}: {match.group().strip()}"
        for path in sorted((ROOT / "tests").glob("*.py"))
        for match in imports.finditer(path.read_text(encoding="utf-8"))
    ]
    assert not found, "\n".join(found)
    assert not old.search((ROOT / "README.md").read_text(encoding="utf-8"))
