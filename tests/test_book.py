"""The book's hygiene: notebooks without outputs, a table of contents that matches book/, lint."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import export
import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))


def test_there_are_chapters() -> None:
    assert len(NOTEBOOKS) >= 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    for number, cell in enumerate(notebook["cells"], start=1):
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [], f"{path.name}, cell {number}: has stored outputs"
            assert cell.get("execution_count") is None, f"{path.name}, cell {number}: was executed"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_chapter_starts_with_a_title_and_runs_on_the_standard_kernel(path: Path) -> None:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    first = notebook["cells"][0]
    assert first["cell_type"] == "markdown"
    assert "".join(first["source"]).startswith("# "), f"{path.name}: needs a '# Title' first"
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"


def test_table_of_contents_lists_every_chapter_and_only_existing_ones() -> None:
    listed = [ROOT / entry for entry in export.toc_files(ROOT)]
    resolved = set()
    for entry in listed:
        candidates = [entry.with_suffix(s) for s in (".ipynb", ".md")] + [entry]
        found = [c for c in candidates if c.is_file()]
        assert found, f"_toc.yml lists {entry.relative_to(ROOT)}, which does not exist"
        resolved.add(found[0])
    orphans = [p.name for p in NOTEBOOKS if p not in resolved]
    assert not orphans, f"notebooks in book/ missing from _toc.yml: {orphans}"


# The reading path: the chapters from the introduction to "Try it" (issue 30). On it a reader meets
# the paper's ideas; the package's guard rails live in collapsed cells, Part V and the appendices.
READING_PATH_END = "book/tryit"
HIDDEN = {"hide-input", "remove-input", "remove-cell", "hide-cell"}
MAX_PATH_LINES, MAX_CHAPTER_LINES, MAX_PATH_WORDS = 4000, 450, 24000


def reading_path() -> list[Path]:
    entries = export.toc_files(ROOT)
    path = entries[: entries.index(READING_PATH_END) + 1]
    return [ROOT / f"{entry}.ipynb" for entry in path if (ROOT / f"{entry}.ipynb").exists()]


def shown(path: Path) -> tuple[int, int]:
    """Visible code lines (blank ones included) and prose words of a chapter."""
    lines = words = 0
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            words += len(cell.source.split())
        elif cell.cell_type == "code" and not HIDDEN & set(cell.metadata.get("tags", [])):
            lines += len(cell.source.split("\n"))
    return lines, words


def test_the_reading_path_shows_the_paper_not_the_plumbing() -> None:
    counts = {path.stem: shown(path) for path in reading_path()}
    print(
        "\n".join(
            f"{name:14} {lines:5} lines {words:6} words" for name, (lines, words) in counts.items()
        )
    )
    assert len(counts) >= 15 and "engineering" not in counts and "performance" not in counts
    too_long = {name: lines for name, (lines, _) in counts.items() if lines > MAX_CHAPTER_LINES}
    assert not too_long, f"chapters showing more than {MAX_CHAPTER_LINES} lines of code: {too_long}"
    assert sum(lines for lines, _ in counts.values()) <= MAX_PATH_LINES
    assert sum(words for _, words in counts.values()) <= MAX_PATH_WORDS


STUDIED = {  # the definitions a reader studies stay on the page, in their chapters
    "attention": ["def attention(", "class MultiHeadedAttention", "def subsequent_mask("],
    "embeddings": ["class PositionwiseFeedForward", "class Embeddings", "def sinusoidal_table("],
    "optimizer": ["def rate("],
    "regularization": ["def smoothed_targets(", "class LabelSmoothing"],
    "training_loop": ["def simple_train_epoch("],
    "first_example": ["def simple_greedy_decode("],
    "bpe": ["class BPETokenizer"],
    "decoding": ["def simple_beam_search("],
}


@pytest.mark.parametrize("chapter", sorted(STUDIED))
def test_the_definitions_a_reader_studies_stay_visible(chapter: str) -> None:
    cells = nbformat.read(ROOT / "book" / f"{chapter}.ipynb", as_version=4).cells
    visible = "\n".join(
        cell.source
        for cell in cells
        if cell.cell_type == "code" and not HIDDEN & set(cell.metadata.get("tags", []))
    )
    missing = [name for name in STUDIED[chapter] if name not in visible]
    assert not missing, f"book/{chapter}.ipynb: {missing} collapsed or gone"


def test_ruff_lint_and_format() -> None:
    targets = ["src", "tests", "tools", "book", "benchmarks"]
    lint = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", *targets],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", *targets],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


@pytest.mark.parametrize(
    ("cell", "what"),
    [
        (nbformat.v4.new_code_cell("raise RuntimeError('a failing check')"), "a cell error"),
        (nbformat.v4.new_markdown_cell("See {ref}`no-such-label`."), "a warning"),
    ],
    ids=["cell-error", "warning"],
)
def test_book_build_fails_on_a_cell_error_or_a_warning(tmp_path: Path, cell, what: str) -> None:
    """The book's settings (README command 1) turn a failing cell or a warning into a failure."""
    for name in ("_config.yml", "references.bib"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "book").mkdir()
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/chapter\n")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A chapter"), cell])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(notebook, tmp_path / "book" / "chapter.ipynb")
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    result = subprocess.run(
        [str(jupyter_book), "build", ".", "--all", "-W", "-n", "--keep-going"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode != 0, f"{what} did not fail the build"
