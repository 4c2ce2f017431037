"""Every test, on every core: README command (2) runs this (through tools/test.sh).

    python tools/run_tests.py

The suite is cut into items, each chapter of book/ (nbval) and each test file of tests/, and one
pytest process per core takes the next item from a queue: the chapters first, then the test files,
each the longest first (their seconds in a measured run, `tools/test_durations.json`; an item it
does not list counts as the median).
Each process runs PyTorch on its share of the cores (`OMP_NUM_THREADS`), so that two processes do
not fight over one core. Beside them, tools/test_pythons.sh installs the package on Python 3.12
and 3.13 and runs its tests there. Then:

- the browser tests, once every chapter has passed: they build the book from the chapters that
  nbval executed in this run, which reach them through the disk (tools/executed_chapters.py,
  `ANNOTATED_TRANSFORMER_TEST_RUN`), so no chapter executes twice; they take a place in the queue
  as soon as the last chapter is done;
- the tests marked `serial` (the decoding workers and threads), alone, with every core.

A line says how each item ended; a failing item's whole output follows it. At the end: the run's
ten slowest tests (from each item's JUnit file in `_build/test-logs/`) and each item's seconds in
`_build/test-logs/durations.json`, which `--keep-durations` also writes to
`tools/test_durations.json` for the next runs' order. The exit status is 0 only if every item, the
browser tests, the serial tests and the other Pythons passed.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
import uuid
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "_build" / "test-logs"
DURATIONS = ROOT / "tools" / "test_durations.json"
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
BROWSER = "tests/test_browser.py"
SERIAL = "serial"  # the marker of the tests that run alone, at the end
NO_TESTS = 5  # pytest's exit status when a file holds only deselected (serial) tests
QUEUED = (-1, 0.0)  # the browser tests' result until they have run


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def items() -> tuple[list[str], list[str]]:
    """The chapters, and every item in the order of the queue: the chapters, longest first, so
    that the browser tests can start early, then the test files, longest first; as paths relative
    to ROOT."""
    known = json.loads(DURATIONS.read_text(encoding="utf-8")) if DURATIONS.is_file() else {}
    default = statistics.median(known.values()) if known else 1.0

    def longest_first(paths: list[str]) -> list[str]:
        return sorted(paths, key=lambda path: (-known.get(path, default), path))

    chapters = [p.relative_to(ROOT).as_posix() for p in (ROOT / "book").glob("*.ipynb")]
    files = [p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("test_*.py")]
    return chapters, [*longest_first(chapters), *longest_first([f for f in files if f != BROWSER])]


class Run:
    """One run of the suite: its queue of items, its results, and what it prints."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.env = {**os.environ, "ANNOTATED_TRANSFORMER_TEST_RUN": uuid.uuid4().hex,
                    "OMP_NUM_THREADS": str(max(1, cores() // workers))}  # fmt: skip
        self.chapters, ordered = items()
        self.todo: queue.Queue[str] = queue.Queue()
        self.front: list[str] = []  # items that jump the queue (the browser tests)
        for item in ordered:
            self.todo.put(item)
        self.total = len(ordered) + 1
        self.results: dict[str, tuple[int, float]] = {}
        self.lock = threading.Lock()

    def next_item(self) -> str | None:
        with self.lock:
            if self.front:
                return self.front.pop()
        try:
            return self.todo.get_nowait()
        except queue.Empty:
            return None

    def run_item(self, item: str) -> None:
        name = item.replace("/", "_")
        started = time.monotonic()
        with (LOGS / f"{name}.log").open("w", encoding="utf-8") as log:
            status = subprocess.call(
                [*PYTEST, f"--junitxml={LOGS / f'{name}.xml'}", "-m", f"not {SERIAL}", item],
                cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        seconds = time.monotonic() - started
        with self.lock:
            self.results[item] = (0 if status == NO_TESTS else status, seconds)
            done = len(self.results) - (self.results.get(BROWSER) == QUEUED)
            chapters = [self.results.get(chapter) for chapter in self.chapters]
            if None not in chapters and BROWSER not in self.results:
                self.results[BROWSER] = QUEUED  # a failure unless it runs and passes
                if all(status == 0 for status, _ in chapters):
                    self.front.append(BROWSER)
                else:  # the book cannot be built from this run's chapters
                    print(f"{BROWSER}: not run, since a chapter failed", flush=True)
            verdict = "passed" if self.results[item][0] == 0 else f"FAILED (exit {status})"
            print(f"[{done:3}/{self.total}] {item} {verdict} in {seconds:.0f} s", flush=True)
            if self.results[item][0] != 0:
                print((LOGS / f"{name}.log").read_text(encoding="utf-8", errors="replace")[-20000:])

    def worker(self) -> None:
        while (item := self.next_item()) is not None:
            self.run_item(item)

    def run(self) -> dict[str, tuple[int, float]]:
        threads = [threading.Thread(target=self.worker) for _ in range(self.workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        while (item := self.next_item()) is not None:  # the browser tests, if queued last
            self.run_item(item)
        return self.results


def slowest(count: int = 10) -> list[tuple[float, str]]:
    """The run's `count` slowest tests (setup, call and teardown together), from the JUnit files."""
    times = []
    for junit in LOGS.glob("*.xml"):
        for case in ElementTree.parse(junit).iter("testcase"):
            times.append(
                (float(case.get("time") or 0), f"{case.get('classname')}::{case.get('name')}")
            )
    return sorted(times, reverse=True)[:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = DURATIONS.relative_to(ROOT)
    parser.add_argument("--keep-durations", action="store_true",
                        help=f"write each item's seconds to {where}")  # fmt: skip
    args = parser.parse_args(argv)
    LOGS.mkdir(parents=True, exist_ok=True)
    for old in LOGS.glob("*"):
        old.unlink()
    started = time.monotonic()
    with (LOGS / "pythons.log").open("w", encoding="utf-8") as log:
        pythons = subprocess.Popen(["bash", "tools/test_pythons.sh"], cwd=ROOT, stdout=log,
                                   stderr=subprocess.STDOUT)  # fmt: skip
    workers = max(1, cores())
    run = Run(workers)
    print(f"tests: {run.total} items on {workers} processes ({run.env['OMP_NUM_THREADS']} thread"
          f" each), the longest first; logs in {LOGS.relative_to(ROOT)}", flush=True)  # fmt: skip
    results = run.run()
    print(f"tests: the items took {time.monotonic() - started:.0f} s; the serial tests, alone:")
    with (LOGS / "serial.log").open("w", encoding="utf-8") as log:
        junit = f"--junitxml={LOGS / 'serial.xml'}"
        serial = subprocess.call([*PYTEST, junit, "-m", SERIAL, "tests"], cwd=ROOT,
                                 env={**run.env, "OMP_NUM_THREADS": str(cores())},
                                 stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    print((LOGS / "serial.log").read_text(encoding="utf-8", errors="replace")[-20000:])
    status = {"serial tests": serial, "Python 3.12 and 3.13": pythons.wait()}
    status |= {item: code for item, (code, _) in results.items()}
    print("======== the package on Python 3.12 and 3.13 ========")
    print((LOGS / "pythons.log").read_text(encoding="utf-8", errors="replace"))
    print("======== the ten slowest tests of the run ========")
    for seconds, name in slowest():
        print(f"{seconds:8.1f} s  {name}")
    durations = {item: round(seconds, 1) for item, (_, seconds) in sorted(results.items())}
    (LOGS / "durations.json").write_text(json.dumps(durations, indent=1) + "\n", encoding="utf-8")
    if args.keep_durations:
        DURATIONS.write_text(json.dumps(durations, indent=1) + "\n", encoding="utf-8")
    failed = [name for name, code in status.items() if code != 0]
    total = time.monotonic() - started
    print(f"tests: {'FAILED: ' + ', '.join(failed) if failed else 'all passed'} in {total:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
