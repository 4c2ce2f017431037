"""A chapter runs wherever it is opened, and the book is published from the one address.

The repository's address is one setting, `repository: url:` in `_config.yml`. These tests check
that the GitHub Pages workflow builds exactly as README command (1) does, that a build with an
address shows Colab and Binder buttons (and one without shows none, and does not fail), that
every chapter's hidden first cell is the one `tools/first_cell.py` writes for that address, and
that a chapter copied alone into an empty folder, with the package installed from its wheel,
either runs or stops at its first cell with one line saying what it needs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import first_cell
import nbformat
import pytest
import yaml
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

import annotated_transformer
from annotated_transformer.book import notebook

ROOT = Path(__file__).resolve().parent.parent
ADDRESS = "https://github.com/example/annotated-transformer"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def readme_command_1() -> str:
    """README command (1), as the README writes it (its comment dropped)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (line,) = [line for line in readme.splitlines() if "# (1)" in line]
    return line.split("#")[0].strip()


def test_the_pages_workflow_builds_with_readme_command_1_and_deploys_build_html() -> None:
    workflow = yaml.safe_load((ROOT / ".github/workflows/pages.yml").read_text(encoding="utf-8"))
    build, deploy = workflow["jobs"]["build"], workflow["jobs"]["deploy"]
    assert [step["run"] for step in build["steps"] if "run" in step] == [readme_command_1()]
    uses = {step["uses"].split("@")[0]: step for step in build["steps"] if "uses" in step}
    assert uses["actions/setup-python"]["with"]["python-version"] == "3.11"
    assert "actions/configure-pages" in uses
    assert uses["actions/upload-pages-artifact"]["with"]["path"] == "_build/html"
    assert [step["uses"].split("@")[0] for step in deploy["steps"]] == ["actions/deploy-pages"]
    assert deploy["needs"] == "build" and workflow["permissions"]["pages"] == "write"


@pytest.mark.parametrize("url", [ADDRESS, ""], ids=["address", "no-address"])
def test_a_build_with_an_address_has_colab_and_binder_buttons(tmp_path: Path, url: str) -> None:
    """A one-page scratch book with the project's settings, execution off, and `url` set."""
    settings = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    settings["execute"]["execute_notebooks"] = "off"
    settings["repository"]["url"] = url
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    shutil.copy(ROOT / "references.bib", tmp_path)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/page\n", encoding="utf-8")
    page = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("# A page"), nbformat.v4.new_code_cell("1 + 1")],
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3"},
            "language_info": {"name": "python"},
        },
    )
    (tmp_path / "book" / "_static").mkdir(parents=True)
    shutil.copy(ROOT / "book" / "_static" / "book.css", tmp_path / "book" / "_static")
    nbformat.write(page, tmp_path / "book" / "page.ipynb")
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    built = subprocess.run(
        [str(jupyter_book), "build", ".", "--all", "-W", "-n", "--keep-going"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    html = (tmp_path / "_build" / "html" / "book" / "page.html").read_text(encoding="utf-8")
    colab = "https://colab.research.google.com/github/example/annotated-transformer/blob/main/"
    binder = "https://mybinder.org/v2/gh/example/annotated-transformer/main?urlpath=lab/tree/"
    links = [colab + "book/page.ipynb", binder + "book/page.ipynb"]
    if url:
        assert all(link in html for link in links), "no Colab or Binder button"
    else:
        assert "colab.research.google.com" not in html and "mybinder.org" not in html


def test_every_chapter_begins_with_the_first_cell_for_the_configured_address() -> None:
    stale = first_cell.stale(ROOT)
    names = [path.relative_to(ROOT).as_posix() for path in stale]
    assert not stale, f"first cell out of date in {names}: run python tools/first_cell.py"


def test_the_first_cell_and_running_the_book_give_the_same_real_commands(tmp_path: Path) -> None:
    """The commands of "Running the book" (appendix "How this book becomes a package") and every
    chapter's first cell come from the one address in `_config.yml`."""
    settings = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    settings["repository"]["url"] = ""
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    assert notebook.repository_address(tmp_path) is None
    assert "no repository address" in notebook.running_the_book(tmp_path).data
    without = first_cell.cell_source(None)
    assert "pip install -e '.[book]'" in without and "UsageError" in without
    settings["repository"]["url"] = ADDRESS + "/"
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    assert notebook.repository_address(tmp_path) == (ADDRESS, "main")
    install = f'pip install "annotated-transformer[book] @ git+{ADDRESS}@main"'
    text = notebook.running_the_book(tmp_path).data
    clone = f"git clone --branch main {ADDRESS}\ncd annotated-transformer && bash tools/book.sh"
    assert clone in text and f"%{install}" in text
    quiet = install.replace("pip install", "pip install --quiet")
    assert f"%{quiet}" in first_cell.cell_source((ADDRESS, "main"))
    for path in (ROOT / "README.md", ROOT / "book" / "appendix_package.ipynb"):
        assert "<the repository" not in path.read_text(encoding="utf-8"), path.name


def code_of(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def test_a_chapter_that_reads_the_repository_names_what_it_reads_in_its_first_cell() -> None:
    for path in first_cell.chapters(ROOT):
        code = code_of(path)
        if any("project_root()" in source for source in code):
            setup = next(source for source in code if "setup_chapter(" in source)
            assert re.search(r"setup_chapter\(\s*reads=", setup), f"{path.name}: no reads=[...]"


def test_outside_a_clone_the_repository_s_files_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(notebook.OutsideTheRepository) as error:
        notebook.repository_files(["results/multi30k-small"], start=tmp_path)
    assert "results/multi30k-small" in str(error.value)
    assert error.value._render_traceback_() == [str(error.value)]
    assert "\n" not in str(error.value)
    assert notebook.repository_files(["results/multi30k-small", "results/*.json"]) == ROOT
    with pytest.raises(notebook.OutsideTheRepository, match="results/no-such-run, missing"):
        notebook.repository_files(["results/no-such-run"], start=ROOT)


@pytest.fixture(scope="module")
def wheel_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package as a reader installs it: built as a wheel, installed into a folder of its own."""
    scratch = tmp_path_factory.mktemp("wheel")
    project = scratch / "project"  # a copy, so that building leaves no build/ in the checkout
    shutil.copytree(
        ROOT / "src",
        project / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, project / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    built = subprocess.run(
        [*pip, "wheel", str(project), "--no-deps", "--no-build-isolation", "-w", str(scratch)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = scratch.glob("annotated_transformer-*.whl")
    site = scratch / "site"
    installed = subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    return site


def without_the_package(folder: Path) -> Path:
    """A PYTHONPATH folder whose sitecustomize hides the checkout's editable install."""
    source = Path(annotated_transformer.__file__).resolve().parent.parent
    if (source / "ipykernel").exists():
        pytest.skip("the package is installed into site-packages: it cannot be hidden alone")
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(
        "import sys\n"
        f"sys.path[:] = [p for p in sys.path if p.rstrip('/') != {str(source)!r}]\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if 'annotated_transformer' not in repr(f)]\n",
        encoding="utf-8",
    )
    return folder


def run_alone(chapter: str, folder: Path) -> tuple[int | None, str, list[str]]:
    """Run book/CHAPTER.ipynb copied alone into `folder`: (failed cell, its output, code cells)."""
    folder.mkdir()
    shutil.copy(ROOT / "book" / f"{chapter}.ipynb", folder)
    chapter_notebook = nbformat.read(folder / f"{chapter}.ipynb", as_version=4)
    client = NotebookClient(
        chapter_notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(folder)}},
    )
    code = [cell for cell in chapter_notebook.cells if cell.cell_type == "code"]
    try:
        client.execute()
    except CellExecutionError:
        ran = [i for i, cell in enumerate(code) if cell.get("execution_count") is not None]
        failed = code[ran[-1]]
        shown = []
        for output in failed.outputs:
            shown += output.get("traceback", [])
            if output.get("name") == "stderr":
                shown.append(output["text"])
        return ran[-1], ANSI.sub("", "\n".join(shown)).strip(), [c.source for c in code]
    return None, "", [c.source for c in code]


FIND = "import importlib.util as u; print(u.find_spec('annotated_transformer'))"


@pytest.mark.parametrize(
    ("chapter", "installed", "expected"),
    [
        ("background", True, None),  # runs to its end
        (
            "real_world",
            True,
            "This chapter reads results/multi30k-small, results/release and "
            "results/variations-full-cuda/base.json, kept",
        ),
        ("background", False, "UsageError: This chapter needs the package annotated-transformer"),
    ],
    ids=["runs", "reads-results", "no-package"],
)
def test_a_chapter_copied_alone_runs_or_stops_at_its_first_cell_with_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    wheel_site: Path,
    chapter: str,
    installed: bool,
    expected: str | None,
) -> None:
    path = wheel_site if installed else without_the_package(tmp_path / "hide")
    paths = [str(path), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))  # the chapter's kernel inherits it
    probe = subprocess.run([sys.executable, "-c", FIND], capture_output=True, text=True)
    assert (str(wheel_site) in probe.stdout) if installed else probe.stdout.strip() == "None"
    failed, shown, code = run_alone(chapter, tmp_path / "alone")
    if expected is None:
        assert failed is None, f"book/{chapter}.ipynb stopped at code cell {failed}: {shown}"
        return
    assert failed is not None, f"book/{chapter}.ipynb ran outside a clone"
    first = next(i for i, source in enumerate(code) if "setup_chapter(" in source)
    assert failed <= first, f"stopped at code cell {failed}, after its first cell: {shown}"
    assert shown.startswith(expected) and "\n" not in shown, shown
