"""tools/run_tests.py, README command (2)'s runner: every chapter and test file is an item of its
queue, the chapters first; the browser tests jump the queue once every chapter has passed; an
item that fails fails the run, and a file with only serial tests does not."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import run_tests


def test_the_queue_holds_every_chapter_and_test_file_once_chapters_first() -> None:
    chapters, ordered = run_tests.items()
    root = run_tests.ROOT
    files = {p.relative_to(root).as_posix() for p in (root / "tests").glob("test_*.py")}
    assert sorted(chapters) == sorted(p.relative_to(root).as_posix()
                                      for p in (root / "book").glob("*.ipynb"))  # fmt: skip
    assert sorted(ordered) == sorted([*chapters, *(files - {run_tests.BROWSER})])
    assert set(ordered[: len(chapters)]) == set(chapters)  # the chapters first
    assert len(ordered) == len(set(ordered))


@pytest.fixture
def fake_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A run over two chapters and two test files whose pytest is a stub: (run, items called)."""
    monkeypatch.setattr(run_tests, "LOGS", tmp_path)
    chapters = ["book/a.ipynb", "book/b.ipynb"]
    files = ["tests/test_x.py", "tests/test_serial_only.py"]
    monkeypatch.setattr(run_tests, "items", lambda: (chapters, [*chapters, *files]))
    called: list[str] = []
    exits = {"tests/test_serial_only.py": run_tests.NO_TESTS}

    def call(command, **kwargs):
        called.append(command[-1])
        return exits.get(command[-1], 0)

    monkeypatch.setattr(subprocess, "call", call)
    return run_tests.Run(workers=2), called, exits


def test_the_browser_tests_run_once_after_every_chapter(fake_run) -> None:
    run, called, _ = fake_run
    results = run.run()
    assert sorted(called) == sorted([*run.chapters, "tests/test_x.py",
                                     "tests/test_serial_only.py", run_tests.BROWSER])  # fmt: skip
    assert called.index(run_tests.BROWSER) > max(called.index(c) for c in run.chapters)
    assert all(status == 0 for status, _ in results.values())  # exit 5: only serial tests
    assert run.env["OMP_NUM_THREADS"] == str(max(1, run_tests.cores() // 2))


def test_a_failing_chapter_fails_the_run_and_the_browser_tests_do_not_run(fake_run) -> None:
    run, called, exits = fake_run
    exits["book/b.ipynb"] = 1
    results = run.run()
    assert results["book/b.ipynb"][0] == 1 and run_tests.BROWSER not in called
    assert results[run_tests.BROWSER] == run_tests.QUEUED  # counted as failed, never run
    assert results["tests/test_x.py"][0] == 0  # the other items still run
