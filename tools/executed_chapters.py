"""Each chapter executes once per test run: nbval runs it, and the book is built from that run.

nbval (the chapters' test) executes every code cell of a chapter in a kernel and keeps what the
cell printed and displayed. `book/conftest.py` hands each passing cell's outputs to `keep_outputs`;
when the last code cell of a chapter has passed, and every one before it, `keep_outputs` writes
the executed chapter to `_build/executed/book/NAME.ipynb` and records it in the session.

The browser test then builds the book from those copies with execution off (`stage_book`):
the configuration, the table of contents, `references.bib` and `book/` (static files included,
those the chapter "Try it" wrote while nbval ran it) are copied to a staging folder, the executed
chapters replace their output-free originals, and Jupyter Book renders what nbval computed. A
chapter not executed in this session (a browser test run on its own, a chapter deselected with
`-k`) means no staging: the build then executes every chapter itself, as README command (1) does.

The hand-off also goes through the disk, so that the chapters and the browser test can run in
different pytest processes (tools/run_tests.py runs the suite as one process per core): with
`ANNOTATED_TRANSFORMER_TEST_RUN` set, each executed copy records that run's name, and `stage_book`
takes a copy that another process of the same run wrote, if it was executed from the chapter as it
is now. A copy left by an earlier run, or by a chapter edited since, is never taken.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
EXECUTED = ROOT / "_build" / "executed"
# chapter path relative to ROOT -> the executed copy written in this session
WRITTEN = pytest.StashKey[dict[str, Path]]()
# chapter path relative to ROOT -> the code cells that passed so far in this session
PASSED = pytest.StashKey[dict[str, set[int]]]()
RUN = "ANNOTATED_TRANSFORMER_TEST_RUN"  # the name of a run whose processes share executed chapters


def source_digest(path: Path) -> str:
    """SHA-256 of a chapter's file: an executed copy names the source it was executed from."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def keep_outputs(config: pytest.Config, item, report: pytest.TestReport) -> None:
    """Give a passed nbval cell its outputs; write the chapter once its last code cell passed."""
    if report.when != "call" or not report.passed or item.test_outputs is None:
        return
    notebook = item.parent
    path = Path(str(notebook.fspath)).resolve()
    relative = path.relative_to(ROOT).as_posix()
    item.cell.outputs = item.test_outputs
    counts = [o.get("execution_count") for o in item.test_outputs if "execution_count" in o]
    item.cell.execution_count = counts[-1] if counts else None
    passed = config.stash.setdefault(PASSED, {}).setdefault(relative, set())
    passed.add(item.cell_num)
    code_cells = sum(cell.cell_type == "code" for cell in notebook.nb.cells)
    if len(passed) < code_cells:
        return
    executed = notebook.nb
    executed.metadata["executed_from"] = source_digest(path)
    if os.environ.get(RUN):
        executed.metadata["executed_in"] = os.environ[RUN]
    target = EXECUTED / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(executed, target)
    config.stash.setdefault(WRITTEN, {})[relative] = target


def stage_book(config: pytest.Config, chapters: list[str], staging: Path) -> Path | None:
    """A copy of the book whose chapters are this run's executed ones, or None.

    `chapters` lists every notebook of the table of contents (relative to ROOT). None when one of
    them was not executed in this session or, through the disk, in this run, or changed since.
    """
    written = dict(config.stash.get(WRITTEN, {}))
    for chapter in chapters:
        copy = written.get(chapter, EXECUTED / chapter)
        if not copy.exists():
            return None
        metadata = nbformat.read(copy, as_version=4).metadata
        if metadata.get("executed_from") != source_digest(ROOT / chapter):
            return None
        this_run = os.environ.get(RUN)
        if chapter not in written and not (this_run and metadata.get("executed_in") == this_run):
            return None
        written[chapter] = copy
    if staging.exists():
        shutil.rmtree(staging)
    shutil.copytree(
        ROOT / "book",
        staging / "book",
        ignore=shutil.ignore_patterns(".*", "__pycache__", "conftest.py"),
    )
    for name in ("_toc.yml", "references.bib"):
        shutil.copy2(ROOT / name, staging / name)
    settings = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    settings["execute"]["execute_notebooks"] = "off"  # the executed copies carry the outputs
    (staging / "_config.yml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    for chapter in chapters:
        shutil.copy2(written[chapter], staging / chapter)
    return staging
