"""Run chapters' code cells with plain `exec`, no Jupyter: the full profile's branches in CI and
the chapters on a bare GPU machine (`benchmarks/gpu.sh chapters`).

    python tools/run_chapters.py [--upto-branch] [--record FILE [--skip-clean]] book/a.ipynb ...

Each chapter's code cells run in order in a fresh Python process of their own (as a notebook
runs in its own kernel: a chapter that adds methods to the package's classes, as the appendices'
`add_to_class` cells do, leaves the next chapter's package untouched), in one namespace, with the
working directory at the chapter's folder (as under Jupyter). A cell's last expression is not
displayed; what a cell prints goes to standard output. With `--upto-branch` a chapter stops
after its last cell that branches on the profile (`profile.pick(...)`, `profile.quick`): what
comes later runs the same code in every profile.

`--record FILE` writes, per chapter, the cells run, the seconds taken (in all and per code cell),
the error (a traceback) if one stopped it, and the `source` it ran (a fingerprint of the chapter
and of the package's code), as JSON, under the machine, profile and command. Chapters that FILE
already holds for the same device and profile stay, and so do its `reasons` (a chapter's name and
why it has no clean time yet, written by whoever ran the calls) until the chapter runs clean.
`--skip-clean` skips the chapters FILE holds clean for the same source, so that on a GPU lent in
short calls each call goes on where the last one stopped. The exit status is 1 if any chapter
failed.

With `ANNOTATED_TRANSFORMER_TINY=DIR` set, the chapters run the full profile at a tiny scale and
write into DIR (see the appendix "How the package is built").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

# A cell whose work depends on the profile's name, not only on its device.
BRANCH = re.compile(r"profile\.(pick|quick|scaled?|root|at_scale)\b")


def code_cells(chapter: Path) -> list[str]:
    """The chapter's code cells, in order."""
    notebook = json.loads(chapter.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]


def last_branch(cells: list[str]) -> int | None:
    """The index of the last code cell that branches on the profile, or None."""
    found = [i for i, source in enumerate(cells) if BRANCH.search(source)]
    return found[-1] if found else None


def run_chapter(chapter: Path, upto_branch: bool = False) -> dict:
    """Execute the chapter's code cells (up to its last branch with `upto_branch`); never raises."""
    cells = code_cells(chapter)
    stop = last_branch(cells) if upto_branch else len(cells) - 1
    cells = cells[: (stop + 1 if stop is not None else 0)]
    namespace: dict = {"__name__": "__main__"}
    started, here = time.monotonic(), os.getcwd()
    done, error, each = 0, None, []
    os.chdir(chapter.resolve().parent)
    try:
        for i, source in enumerate(cells):
            print(f"--- {chapter.name}, code cell {i}", flush=True)
            start = time.monotonic()
            exec(compile(source, f"{chapter.name}[code cell {i}]", "exec"), namespace)
            each.append(round(time.monotonic() - start, 1))
            done += 1
    except BaseException:  # a chapter's failure is recorded, and the next chapter runs
        error = traceback.format_exc(limit=-8)
        print(error, file=sys.stderr, flush=True)
    finally:
        os.chdir(here)
        _close_figures()
    seconds = round(time.monotonic() - started, 1)
    return {"cells": len(cells), "done": done, "seconds": seconds, "error": error,
            "cell_seconds": each}  # fmt: skip


def run_isolated(chapter: Path, upto_branch: bool = False) -> dict:
    """`run_chapter` in a fresh Python process; a process that dies first is recorded as such."""
    with tempfile.TemporaryDirectory() as scratch:
        outcome = Path(scratch) / "outcome.json"
        command = [sys.executable, __file__, "--outcome", str(outcome), str(chapter)]
        started = time.monotonic()
        done = subprocess.run([*command, *(["--upto-branch"] if upto_branch else [])])
        if outcome.exists():
            return json.loads(outcome.read_text(encoding="utf-8"))
    seconds = round(time.monotonic() - started, 1)
    error = f"the chapter's process ended with status {done.returncode} before it finished"
    return {"cells": len(code_cells(chapter)), "done": 0, "seconds": seconds, "error": error,
            "cell_seconds": []}  # fmt: skip


def fingerprint(chapter: Path) -> str:
    """A SHA-256 of the chapter and of the package's source, cut to 16 digits."""
    digest = hashlib.sha256(chapter.read_bytes())
    package = Path(__file__).resolve().parent.parent / "src" / "annotated_transformer"
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _close_figures() -> None:
    """Free the chapter's matplotlib figures, if it drew any."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="+", type=Path)
    parser.add_argument(
        "--upto-branch", action="store_true",
        help="stop after each chapter's last cell that branches on the profile",
    )  # fmt: skip
    parser.add_argument("--record", type=Path, help="write each chapter's outcome here (JSON)")
    parser.add_argument(
        "--skip-clean", action="store_true",
        help="skip the chapters that --record holds clean for the same chapter and package code",
    )  # fmt: skip
    parser.add_argument("--outcome", type=Path, help=argparse.SUPPRESS)  # run_isolated's child
    args = parser.parse_args(argv)
    os.environ.setdefault("MPLBACKEND", "Agg")
    if args.outcome:  # one chapter, in the process run_isolated started for it
        outcome = run_chapter(args.chapters[0], args.upto_branch)
        args.outcome.write_text(json.dumps(outcome), encoding="utf-8")
        return 0
    record = _start_record(args.record, argv)
    failed = []
    for chapter in args.chapters:
        source, earlier = fingerprint(chapter), record["chapters"].get(chapter.name, {})
        if args.skip_clean and earlier.get("source") == source and earlier.get("error") is None:
            print(f"{chapter.name}: recorded clean for this source, skipped", flush=True)
            continue
        outcome = {**run_isolated(chapter, args.upto_branch), "source": source}
        record["chapters"][chapter.name] = outcome
        status = "ok" if outcome["error"] is None else "FAILED"
        if outcome["error"] is not None:
            failed.append(chapter.name)
        else:
            record["reasons"].pop(chapter.name, None)
        print(f"{chapter.name}: {outcome['done']}/{outcome['cells']} code cells, "
              f"{outcome['seconds']} s, {status}", flush=True)  # fmt: skip
        if args.record:  # after each chapter: a run cut short keeps what it measured
            args.record.parent.mkdir(parents=True, exist_ok=True)
            args.record.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return 1 if failed else 0


def _start_record(path: Path | None, argv: list[str] | None) -> dict:
    """The record's header (the machine, the profile, the command), and the chapters an earlier
    run recorded in `path` on the same machine and profile (a run may take several calls)."""
    import platform

    import torch

    from annotated_transformer.profile import current_profile
    from annotated_transformer.util.device import describe_device

    profile = current_profile()
    words = sys.argv[1:] if argv is None else argv
    header = {
        "profile": profile.scale, "device": describe_device(torch.device(profile.device)),
        "python": platform.python_version(), "torch": torch.__version__,
        "command": " ".join(["python tools/run_chapters.py", *words]),
    }  # fmt: skip
    earlier = json.loads(path.read_text(encoding="utf-8")) if path and path.exists() else {}
    same = all(earlier.get(key) == header[key] for key in ("profile", "device"))
    kept = {key: earlier.get(key, {}) if same else {} for key in ("chapters", "reasons")}
    return {**header, **kept}


if __name__ == "__main__":
    sys.exit(main())
