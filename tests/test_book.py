"""The book's hygiene: notebooks without outputs, a table of contents that matches book/, lint."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import export
import nbformat
import pytest

from annotated_transformer.book import notebook

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
HIDDEN = notebook.COLLAPSED_TAGS


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


# The reading path: the chapters from the introduction to "Try it" (issues 30, 42 and 57). On it a
# reader meets the paper's ideas; what guards, saves, validates or distributes lives in Part V and
# the appendices. Each chapter's main line is what stands above its "## Going deeper" (measured
# variants, closed forms, internals) and "## Exercises"; the budgets hold for the main line, read
# in one evening: 1,400 / 20 + 11,000 / 230 minutes is under two hours. The introduction's reading
# map counts with the same code (`reading_map`).
MAX_PATH_LINES, MAX_CHAPTER_LINES, MAX_PATH_WORDS, MAX_PATH_COLLAPSED = 1400, 180, 11000, 1200
# A visible cell on the path may not hold a guard rail: a check function defined, a refusal caught,
# pytest's raises, or the chapter's setup.
GUARD_RAIL = re.compile(
    r"^\s*def _?check|except\b[^:\n]*(Error|Exception)\b"
    r"|pytest\.raises|\bsetup_chapter\(",
    re.MULTILINE,
)


def reading_path() -> list[Path]:
    return [path for _, _, path in notebook.reading_path(ROOT)]


def print_reading_map(rows: list[dict]) -> None:
    """The map: per chapter, the main line's counts and minutes, then the deeper sections' and the
    exercises' minutes; the last row sums them."""
    print(
        f"\n{'chapter':16} {'visible':>7} {'collapsed':>9} {'words':>6} {'main min':>8}"
        f" {'deeper min':>10} {'exercises min':>13}"
    )
    for row in [*rows, None]:
        if row is None:
            keys = ("visible", "collapsed", "words", "minutes")
            row = {key: sum(r[key] for r in rows) for key in keys}
            for section in ("deeper", "exercises"):
                row[section] = {"minutes": sum(r[section]["minutes"] for r in rows)}
            row["entry"] = "path"
        print(
            f"{Path(row['entry']).name:16} {row['visible']:7} {row['collapsed']:9} {row['words']:6}"
            f" {row['minutes']:8.1f} {row['deeper']['minutes']:10.1f}"
            f" {row['exercises']['minutes']:13.1f}"
        )


def test_the_main_line_reads_in_one_evening() -> None:
    """The main line's budgets: visible and collapsed code, prose; the map prints per chapter."""
    rows = notebook.reading_map(ROOT)
    print_reading_map(rows)
    total = {key: sum(row[key] for row in rows) for key in ("visible", "collapsed", "words")}
    minutes = sum(row["minutes"] for row in rows)
    print(f"main line: {minutes / 60:.2f} hours")
    names = [Path(row["entry"]).name for row in rows]
    assert len(rows) >= 15 and names[0] == "introduction" and names[-1] == "tryit"
    assert "engineering" not in names and "performance" not in names
    too_long = {
        name: row["visible"]
        for name, row in zip(names, rows, strict=True)
        if row["visible"] > MAX_CHAPTER_LINES
    }
    assert not too_long, f"main lines showing more than {MAX_CHAPTER_LINES} code lines: {too_long}"
    assert total["visible"] <= MAX_PATH_LINES, f"{total['visible']} visible code lines on the path"
    assert total["words"] <= MAX_PATH_WORDS, f"{total['words']} words of prose on the path"
    assert total["collapsed"] <= MAX_PATH_COLLAPSED, f"{total['collapsed']} collapsed code lines"
    assert minutes < 120, f"the main line reads in {minutes:.0f} minutes"


def test_going_deeper_comes_once_and_before_the_exercises() -> None:
    """A chapter of the path has at most one "## Going deeper", above its "## Exercises"."""
    wrong = []
    for path in reading_path():
        headings = [
            line.rstrip()
            for cell in nbformat.read(path, as_version=4).cells
            if cell.cell_type == "markdown"
            for line in cell.source.split("\n")
            if line.startswith(("## Going deeper", "## Exercises"))
        ]
        if headings not in (
            [],
            ["## Going deeper"],
            ["## Exercises"],
            ["## Going deeper", "## Exercises"],
        ):
            wrong.append(f"{path.name}: {headings}")
    assert not wrong, "sections out of order:\n" + "\n".join(wrong)


# Parts V and VI teach how the engineering is built: each section's key code visible, the rest of
# its module collapsed (issue 47). Their budgets of visible code lines, per chapter; every chapter
# of the two parts has one.
PART_BUDGETS = {
    "engineering": 900,
    "fast_decoding": 650,  # 500, and attention in one kernel and the packed step (issue 61)
    "performance": 500,
    "serving": 320,  # 300, and open_translator, the one door to a model (issue 59)
    "subwords": 250,
    "table3": 600,
    "paper_scale": 400,
}


def test_parts_v_and_vi_keep_their_budgets() -> None:
    """Each chapter of Parts V and VI shows at most its budget of visible code lines."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    chapters = [
        Path(chapter["file"]).name
        for part in toc["parts"]
        if part["caption"].startswith(("Part V:", "Part VI:"))
        for chapter in part["chapters"]
    ]
    assert sorted(chapters) == sorted(PART_BUDGETS), "a chapter of Parts V-VI without a budget"
    print(f"\n{'chapter':16} {'visible':>7} {'budget':>6} {'collapsed':>9} {'minutes':>7}")
    over = {}
    for name in chapters:
        counts = notebook.chapter_counts(ROOT / "book" / f"{name}.ipynb")["whole"]
        print(f"{name:16} {counts['visible']:7} {PART_BUDGETS[name]:6} {counts['collapsed']:9}"
              f" {counts['minutes']:7.1f}")  # fmt: skip
        if counts["visible"] > PART_BUDGETS[name]:
            over[name] = counts["visible"]
    assert not over, f"visible code lines over the chapter's budget: {over}"


def test_the_counts_follow_the_rules() -> None:
    """Fenced text is not prose, blank lines are code, a collapsed tag moves lines over, and the
    main line ends at "## Going deeper" (inside a cell too); exercises are counted apart."""
    chapter = {
        "cells": [
            {"cell_type": "markdown", "source": ["# A title\n", "two words\n", "```\nnot\n```"]},
            {"cell_type": "code", "metadata": {}, "source": ["x = 1\n", "\n", "y = 2"]},
            {"cell_type": "code", "metadata": {"tags": ["hide-input"]}, "source": ["z = 3"]},
            {"cell_type": "markdown", "source": ["one more\n", "## Going deeper\n", "a b c"]},
            {"cell_type": "code", "metadata": {}, "source": ["deep = 1"]},
            {"cell_type": "markdown", "source": ["## Exercises"]},
            {"cell_type": "code", "metadata": {"tags": ["hide-cell"]}, "source": ["a\n", "b"]},
        ]
    }
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "chapter.ipynb"
        path.write_text(json.dumps(chapter), encoding="utf-8")
        counts = notebook.chapter_counts(path)
    assert counts["title"] == "A title"
    assert (counts["visible"], counts["collapsed"], counts["words"]) == (3, 1, 7)
    assert counts["minutes"] == 7 / 230 + 3 / 20
    deeper, exercises = counts["deeper"], counts["exercises"]
    assert (deeper["visible"], deeper["collapsed"], deeper["words"]) == (1, 0, 6)
    assert (exercises["visible"], exercises["collapsed"], exercises["words"]) == (0, 2, 2)
    assert counts["whole"]["visible"] == 4 and counts["whole"]["words"] == 15


def test_no_guard_rail_on_the_reading_path() -> None:
    """No visible cell of the path defines a check, catches a refusal or sets the chapter up."""
    found = []
    for path in reading_path():
        for number, cell in enumerate(nbformat.read(path, as_version=4).cells, start=1):
            if cell.cell_type != "code" or HIDDEN & set(cell.metadata.get("tags", [])):
                continue
            match = GUARD_RAIL.search(cell.source)
            if match:
                found.append(f"{path.name} cell {number}: {match.group(0).strip()!r}")
    assert not found, "guard rails on the reading path:\n" + "\n".join(found)


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
