"""The executed chapters reach the book build through the disk: a copy that another process of the
same test run wrote is taken; one of an earlier run, or of a chapter edited since, is not."""

from __future__ import annotations

from pathlib import Path

import executed_chapters
import nbformat
import pytest


class Config:
    """What `stage_book` reads of pytest's config: the stash of this process."""

    def __init__(self) -> None:
        self.stash = pytest.Stash()


@pytest.fixture
def book(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A one-chapter book in tmp_path, with the module's folders pointed at it."""
    root = tmp_path / "root"
    (root / "book").mkdir(parents=True)
    chapter = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    nbformat.write(chapter, root / "book" / "one.ipynb")
    (root / "_config.yml").write_text("execute:\n  execute_notebooks: force\n", encoding="utf-8")
    for name in ("_toc.yml", "references.bib"):
        (root / name).write_text("", encoding="utf-8")
    monkeypatch.setattr(executed_chapters, "ROOT", root)
    monkeypatch.setattr(executed_chapters, "EXECUTED", root / "_build" / "executed")
    return root


def execute(root: Path, run: str | None) -> None:
    """What another process's `keep_outputs` leaves on the disk for book/one.ipynb."""
    executed = nbformat.read(root / "book" / "one.ipynb", as_version=4)
    executed.metadata["executed_from"] = executed_chapters.source_digest(root / "book/one.ipynb")
    if run is not None:
        executed.metadata["executed_in"] = run
    target = root / "_build" / "executed" / "book" / "one.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(executed, target)


def test_a_copy_of_this_run_is_taken(book: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(executed_chapters.RUN, "run-2")
    execute(book, "run-2")
    staged = executed_chapters.stage_book(Config(), ["book/one.ipynb"], book / "staged")
    assert staged is not None
    assert "executed_in" in nbformat.read(staged / "book" / "one.ipynb", as_version=4).metadata
    assert "execute_notebooks: 'off'" in (staged / "_config.yml").read_text(encoding="utf-8")


@pytest.mark.parametrize("run", [None, "run-1"], ids=["no-run", "an-earlier-run"])
def test_a_copy_of_another_run_is_not(book: Path, monkeypatch: pytest.MonkeyPatch, run) -> None:
    monkeypatch.setenv(executed_chapters.RUN, "run-2")
    execute(book, run)
    assert executed_chapters.stage_book(Config(), ["book/one.ipynb"], book / "staged") is None


def test_without_a_run_only_this_process_counts(
    book: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(executed_chapters.RUN, raising=False)
    execute(book, None)
    assert executed_chapters.stage_book(Config(), ["book/one.ipynb"], book / "staged") is None


def test_a_chapter_edited_since_is_not_taken(book: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(executed_chapters.RUN, "run-2")
    execute(book, "run-2")
    chapter = nbformat.read(book / "book" / "one.ipynb", as_version=4)
    chapter.cells.append(nbformat.v4.new_code_cell("print(2)"))
    nbformat.write(chapter, book / "book" / "one.ipynb")
    assert executed_chapters.stage_book(Config(), ["book/one.ipynb"], book / "staged") is None
