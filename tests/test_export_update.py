"""`tools/export.py --update`: changes made in a generated module go back into their cells.

A round trip is: export, edit the module, `--update`, and then `--check` is clean and the cell
holds the edit. A change that maps to no cell is refused in one line naming the module and line,
and no notebook changes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "export_project"
EXPORT = ROOT / "tools" / "export.py"
SHAPES = "src/annotated_transformer/shapes.py"


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(EXPORT), "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The fixture project, exported."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("expected"))
    assert run(root).returncode == 0
    return root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


def cell(root: Path, notebook: str, number: int) -> str:
    """The source of a notebook's cell, numbered from 1 as Jupyter shows it."""
    cells = json.loads((root / "book" / notebook).read_text(encoding="utf-8"))["cells"]
    return "".join(cells[number - 1]["source"])


def notebooks(root: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((root / "book").glob("*.ipynb"))}


def test_edits_of_a_body_a_docstring_a_method_and_a_new_function_go_back(project: Path) -> None:
    before = json.loads((project / "book/shapes.ipynb").read_text(encoding="utf-8"))
    module = project / SHAPES
    edit(module, "    return math.pi * r * r\n", "    return math.pi * r**2  # one product\n")
    edit(module, '        """Twice the radius."""', '        """The diameter: twice the radius."""')
    edit(module, "        return circumference(self.r)\n",
         "        length = circumference(self.r)\n        return length\n")  # fmt: skip
    half = "\n\ndef half(r: float) -> float:\n    return r / 2\n"
    edit(module, "    return 2 * math.pi * r\n", "    return 2 * math.pi * r\n" + half)
    result = run(project, "--update")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"updated book/more.ipynb, cell 2 (from {SHAPES}, line 43)",
        f"updated book/more.ipynb, cell 4 (from {SHAPES}, line 36)",
        f"updated book/shapes.ipynb, cell 6 (from {SHAPES}, line 13)",
        f"updated book/shapes.ipynb, cell 12 (from {SHAPES}, line 26)",
    ]
    assert cell(project, "shapes.ipynb", 6).endswith("    return math.pi * r**2  # one product")
    assert '    """The diameter: twice the radius."""\n' in cell(project, "shapes.ipynb", 12)
    assert cell(project, "more.ipynb", 4).endswith(  # a folded method: the class's indent less
        "def perimeter(self) -> float:\n    length = circumference(self.r)\n    return length"
    )
    assert cell(project, "more.ipynb", 2).endswith(
        "    return 2 * math.pi * r\n\n\ndef half(r: float) -> float:\n    return r / 2"
    )
    check = run(project, "--check")
    assert check.returncode == 0, check.stdout  # the chapters now export the edited module
    after = json.loads((project / "book/shapes.ipynb").read_text(encoding="utf-8"))
    pairs = enumerate(zip(before["cells"], after["cells"], strict=True))
    changed = [i for i, (a, b) in pairs if a != b]
    assert changed == [5, 11]  # cells 6 and 12, nothing else
    assert {k: v for k, v in after.items() if k != "cells"} == {
        k: v for k, v in before.items() if k != "cells"
    }
    assert run(project, "--update").stdout.strip() == "nothing to do: no module was changed"


def test_a_new_import_in_a_module_of_one_cell_goes_back(project: Path) -> None:
    module = project / "src/annotated_transformer/extra.py"
    edit(module, "VALUE = 42\n", "import os\n\nVALUE = 42\nNAME = os.sep\n")
    result = run(project, "--update")
    assert result.returncode == 0, result.stderr
    assert cell(project, "more.ipynb", 7) == "# export\nimport os\n\nVALUE = 42\nNAME = os.sep"
    assert run(project, "--check").returncode == 0


WRITTEN_BY_THE_EXPORTER = "lines the exporter writes itself"
KEEPS_THE_INDENT = "keeps the class body's indent"
CLASS_LINE = '# From book/shapes.ipynb, "Shapes" › "Circles".\nclass Circle:'
CASES = [
    pytest.param("# and run `python", "# then `python", 3, WRITTEN_BY_THE_EXPORTER, id="header"),
    pytest.param(
        '# From book/more.ipynb, "More shapes".\n', "# From elsewhere.\n", 39,
        WRITTEN_BY_THE_EXPORTER, id="marker",
    ),
    pytest.param(
        "        return circumference(self.r)\n",
        "        return circumference(self.r)\n\ndef loose() -> None:\n    pass\n", 38,
        KEEPS_THE_INDENT, id="top-level-in-a-class",
    ),
    pytest.param(
        "        return 2 * self.r\n", "        return 2 * self.r\nprint(1)\n", 28,
        KEEPS_THE_INDENT, id="unindented-in-a-method",
    ),
    pytest.param(
        f"    return math.pi * r * r\n\n\n{CLASS_LINE}",
        "    return math.pi * r * r\nclass Circle:",
        14, WRITTEN_BY_THE_EXPORTER, id="two-cells-joined",
    ),
    pytest.param(  # the control: this one maps, and round-trips
        "    def perimeter(self) -> float:\n", "    def perimeter(self) -> float:\n    # a\n",
        36,
        None, id="a-comment-in-a-method",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "line", "reason"), CASES)
def test_a_change_that_maps_to_no_cell_is_one_line_and_changes_nothing(
    project: Path, old: str, new: str, line: int, reason: str | None
) -> None:
    edit(project / SHAPES, old, new)
    before = notebooks(project)
    result = run(project, "--update")
    if reason is None:
        assert result.returncode == 0, result.stderr
        assert run(project, "--check").returncode == 0
        return
    assert result.returncode == 2
    assert result.stderr.startswith(f"export.py: error: {SHAPES}, line {line}: ")
    assert reason in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert notebooks(project) == before  # nothing written
    assert not list((project / "book").glob(".*tmp"))


def test_an_edit_the_chapter_could_not_export_is_refused(project: Path) -> None:
    """A method cell holds only decorated functions: a plain function there does not go back."""
    edit(project / SHAPES, "        return circumference(self.r)\n",
         "        return circumference(self.r)\n\n    def loose(self) -> None:\n"
         "        pass\n")  # fmt: skip
    before = notebooks(project)
    result = run(project, "--update")
    assert result.returncode == 2
    assert result.stderr.startswith(f"export.py: error: {SHAPES}, line 38: written back, ")
    assert "book/more.ipynb, cell 4" in result.stderr
    assert notebooks(project) == before


def test_update_refuses_a_linked_notebook_and_a_missing_module(project: Path) -> None:
    edit(project / SHAPES, "    return math.pi * r * r\n", "    return math.pi * r**2\n")
    real = project / "book" / "shapes-real.ipynb"
    (project / "book/shapes.ipynb").rename(real)
    (project / "book/shapes.ipynb").symlink_to(real.name)
    result = run(project, "--update")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "export.py: error: book/shapes.ipynb: a link; --update writes only real files"
    )
    (project / SHAPES).unlink()
    result = run(project, "--update")
    assert result.returncode == 2
    assert f"{SHAPES}: missing; run `python tools/export.py`" in result.stderr
    assert run(project, "--update", "--check").returncode == 2  # one mode at a time


def test_round_trip_on_the_book_itself(tmp_path: Path) -> None:
    """A function's body edited in a module of the real book (hoisted imports, folded methods)
    goes back into its chapter's cell, and the whole package still matches the chapters."""
    root = tmp_path / "book"
    (root / "src").mkdir(parents=True)
    shutil.copy(ROOT / "_toc.yml", root)
    shutil.copytree(ROOT / "book", root / "book", ignore=shutil.ignore_patterns("_build", ".*"))
    package = Path("src", "annotated_transformer")
    skip = shutil.ignore_patterns("__pycache__", "*.safetensors", "*.pt")
    shutil.copytree(ROOT / package, root / package, ignore=skip)
    module = root / "src/annotated_transformer/model/masks.py"
    text = module.read_text(encoding="utf-8")
    line = next(line for line in text.splitlines() if line.startswith("def subsequent_mask("))
    edit(module, line + "\n", line + "\n    # (edited in the module)\n")
    result = run(root, "--update")
    assert result.returncode == 0, result.stderr
    (changed,) = result.stdout.splitlines()
    notebook = changed.split("updated ", 1)[1].split(",")[0]
    cells = json.loads((root / notebook).read_text(encoding="utf-8"))["cells"]
    sources = ["".join(c["source"]) for c in cells]
    assert sum("    # (edited in the module)\n" in s for s in sources) == 1
    check = run(root, "--check")
    assert check.returncode == 0, check.stdout
