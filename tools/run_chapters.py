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
short calls each call goes on where the last one stopped. SIGTERM (a call's time cap) stops the
running chapter (its process is given `GRACE` seconds, as a trainer saves a checkpoint at SIGTERM,
then killed), records how far it got, and runs no further chapter. The exit status is 1 if any
chapter failed or was stopped.

With `ANNOTATED_TRANSFORMER_TINY=DIR` set, the chapters run the full profile at a tiny scale and
write into DIR (see the appendix "How the package is built").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

# A cell whose work depends on the profile's name, not only on its device.
BRANCH = re.compile(r"profile\.(pick|quick|scaled?|root|at_scale)\b")
GRACE = 30  # seconds a chapter's process has after SIGTERM before it is killed


def code_cells(chapter: Path) -> list[str]:
    """The chapter's code cells, in order."""
    notebook = json.loads(chapter.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]


def last_branch(cells: list[str]) -> int | None:
    """The index of the last code cell that branches on the profile, or None."""
    found = [i for i, source in enumerate(cells) if BRANCH.search(source)]
    return found[-1] if found else None


def run_chapter(chapter: Path, upto_branch: bool = False, progress=None) -> dict:
    """Execute the chapter's code cells (up to its last branch with `upto_branch`); never raises.
    `progress`, if given, is called with the outcome so far after each cell."""
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
            if progress is not None:
                progress(_outcome(len(cells), done, started, None, each))
    except BaseException:  # a chapter's failure is recorded, and the next chapter runs
        error = traceback.format_exc(limit=-8)
        print(error, file=sys.stderr, flush=True)
    finally:
        os.chdir(here)
        _close_figures()
    return _outcome(len(cells), done, started, error, each)


def _outcome(cells: int, done: int, started: float, error: str | None, each: list) -> dict:
    seconds = round(time.monotonic() - started, 1)
    return {"cells": cells, "done": done, "seconds": seconds, "error": error,
            "cell_seconds": list(each)}  # fmt: skip


class Stopped(Exception):
    """SIGTERM reached the runner: the chapter running was stopped, and no other one starts."""


def run_isolated(chapter: Path, upto_branch: bool = False) -> dict:
    """`run_chapter` in a fresh Python process; a process that dies first is recorded as such,
    with the cells it finished. SIGTERM stops it (after `GRACE` seconds, by force)."""
    with tempfile.TemporaryDirectory() as scratch:
        outcome = Path(scratch) / "outcome.json"
        command = [sys.executable, __file__, "--outcome", str(outcome), str(chapter)]
        started = time.monotonic()
        child = subprocess.Popen([*command, *(["--upto-branch"] if upto_branch else [])])
        stopped = _wait(child)
        found = json.loads(outcome.read_text(encoding="utf-8")) if outcome.exists() else None
    if found is not None and found["error"] is None and found["done"] == found["cells"]:
        return found
    seconds = round(time.monotonic() - started, 1)
    found = found or _outcome(len(code_cells(chapter)), 0, started, None, [])
    if found["error"] is not None:  # a cell failed (or SIGTERM reached it: `Stopped`)
        error = found["error"]
    elif stopped:
        error = f"stopped by SIGTERM (a time cap) in code cell {found['done']}, after {seconds} s"
    else:
        error = f"the chapter's process ended with status {child.returncode} before it finished"
    return {**found, "seconds": seconds, "error": error, "stopped": stopped}


def _wait(child: subprocess.Popen) -> bool:
    """Wait for the chapter's process; True if SIGTERM came meanwhile (the process is then
    passed the signal, given GRACE seconds, and killed if still running)."""
    stop = []
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    try:
        while child.poll() is None and not stop:
            time.sleep(0.2)
        if stop:
            child.terminate()
            try:
                child.wait(GRACE)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    return bool(stop)


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

        def write(outcome: dict) -> None:
            args.outcome.write_text(json.dumps(outcome), encoding="utf-8")

        signal.signal(signal.SIGTERM, _raise_stopped)  # a trainer's own handler comes first
        write(run_chapter(args.chapters[0], args.upto_branch, progress=write))
        return 0
    record = _start_record(args.record, argv)
    failed = []
    for chapter in args.chapters:
        source, earlier = fingerprint(chapter), record["chapters"].get(chapter.name, {})
        if args.skip_clean and earlier.get("source") == source and earlier.get("error") is None:
            print(f"{chapter.name}: recorded clean for this source, skipped", flush=True)
            continue
        outcome = {**run_isolated(chapter, args.upto_branch), "source": source}
        stopped = outcome.pop("stopped", False)
        record["chapters"][chapter.name] = outcome
        status = "ok" if outcome["error"] is None else "STOPPED" if stopped else "FAILED"
        if outcome["error"] is not None:
            failed.append(chapter.name)
        else:
            record["reasons"].pop(chapter.name, None)
        print(f"{chapter.name}: {outcome['done']}/{outcome['cells']} code cells, "
              f"{outcome['seconds']} s, {status}", flush=True)  # fmt: skip
        if args.record:  # after each chapter: a run cut short keeps what it measured
            args.record.parent.mkdir(parents=True, exist_ok=True)
            args.record.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        if stopped:
            print("stopped by SIGTERM: no further chapter runs", flush=True)
            break
    return 1 if failed else 0


def _raise_stopped(*_) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the runner may pass the signal on too
    raise Stopped("stopped by SIGTERM (a time cap)")


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
