"""Write the hidden first cell that lets a chapter run wherever it is opened.

A chapter downloaded alone (a page's download button) or launched on Colab or Binder is not in a
clone of the book's repository, and the package may not be installed there. Before each chapter's
first code cell this writes one cell, tagged `remove-cell` (the book does not show it; the
notebook a reader downloads or launches keeps it), that checks for the package:

- with `repository: url:` set in `_config.yml`, it installs the package from there (`%pip`);
- without, it stops with one line saying how to install it from a clone.

Multi30k needs nothing: the package downloads it when a chapter reads it, checked against its
SHA-256. The chapters that read the records in `results/` name them in their first cell,
`setup_chapter(reads=[...])`, and stop there outside a clone. The cell depends on the one
setting, so after changing it:

    python tools/first_cell.py           # rewrite the cells
    python tools/first_cell.py --check   # exit 1 if a chapter's cell is not the one written here
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from export import toc_files

from annotated_transformer.book.notebook import install_command, repository_address

ROOT = Path(__file__).resolve().parent.parent
FIRST_LINE = "# Opened outside a clone of the book's repository (downloaded, on Colab or Binder)?"
TAG = "remove-cell"


def cell_source(address: tuple[str, str] | None) -> str:
    """The cell for the repository `address` (url, branch), or for none."""
    head = (
        f"{FIRST_LINE}\n"
        "import importlib.util\n\n"
        "from IPython.core.error import UsageError\n\n"
        'if importlib.util.find_spec("annotated_transformer") is None:\n'
    )
    if address is None:
        need = "This chapter needs the package annotated-transformer: in a clone of the book's"
        run = "repository, run  pip install -e '.[book]'  and restart the kernel"
        return head + f'    need = "{need}"\n    raise UsageError(f"{{need}} {run}")'
    url, branch = address
    install = install_command(url, branch).replace("pip install", "pip install --quiet")
    return head + (
        f'    print("Installing annotated-transformer from {url} ({branch})")\n'
        f"    %{install}\n"
        "    importlib.invalidate_caches()\n"
        '    if importlib.util.find_spec("annotated_transformer") is None:\n'
        '        raise UsageError("annotated-transformer was not installed: pip says why above")'
    )


def is_first_cell(cell: dict) -> bool:
    source = "".join(cell.get("source", []))
    return cell["cell_type"] == "code" and source.startswith(FIRST_LINE)


def with_first_cell(notebook: dict, source: str) -> dict:
    """`notebook` with the cell `source` just before its first other code cell."""
    cells = [cell for cell in notebook["cells"] if not is_first_cell(cell)]
    code = [i for i, cell in enumerate(cells) if cell["cell_type"] == "code"]
    if code:
        cell = {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {"tags": [TAG]},
            "outputs": [],
            "source": source.splitlines(keepends=True),
        }
        cells.insert(code[0], cell)
    return {**notebook, "cells": cells}


def chapters(root: Path = ROOT) -> list[Path]:
    """The notebooks of the table of contents."""
    paths = [root / f"{entry}.ipynb" for entry in toc_files(root)]
    return [path for path in paths if path.exists()]


def stale(root: Path = ROOT, write: bool = False) -> list[Path]:
    """The chapters whose first cell differs from the one for `_config.yml`'s address."""
    source = cell_source(repository_address(root))
    found = []
    for path in chapters(root):
        text = path.read_text(encoding="utf-8")
        notebook = with_first_cell(json.loads(text), source)
        new = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
        if new != text:
            found.append(path)
            if write:
                path.write_text(new, encoding="utf-8")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on a change")
    args = parser.parse_args(argv)
    changed = stale(write=not args.check)
    names = ", ".join(path.relative_to(ROOT).as_posix() for path in changed)
    if args.check and changed:
        print(f"first cell out of date: {names}; run python tools/first_cell.py", file=sys.stderr)
        return 1
    if changed:
        print(f"wrote the first cell of {names}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
