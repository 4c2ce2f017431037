"""tools/run_chapters.py runs each chapter in a process of its own, as a notebook in its kernel."""

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def chapter(folder: Path, name: str, *cells: str) -> Path:
    path = folder / name
    code = [{"cell_type": "code", "metadata": {}, "source": source} for source in cells]
    path.write_text(json.dumps({"cells": code, "metadata": {}, "nbformat": 4}), encoding="utf-8")
    return path


def run(
    tmp_path: Path, *chapters: Path, skip: bool = False
) -> tuple[subprocess.CompletedProcess, dict]:
    record = tmp_path / "record.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tools")])}
    env.pop("ANNOTATED_TRANSFORMER_PROFILE", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "run_chapters.py"), "--record", str(record),
         *(["--skip-clean"] if skip else []), *map(str, chapters)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return done, json.loads(record.read_text(encoding="utf-8"))


def test_a_chapter_that_patches_a_module_leaves_the_next_one_untouched(tmp_path):
    first = chapter(tmp_path, "a.ipynb", "import json\njson.PATCHED = True", "x = 1")
    second = chapter(tmp_path, "b.ipynb", "import json\nassert not hasattr(json, 'PATCHED')")
    done, record = run(tmp_path, first, second)
    chapters = record["chapters"]
    assert done.returncode == 0, done.stderr
    assert chapters["a.ipynb"]["done"] == chapters["a.ipynb"]["cells"] == 2
    assert chapters["b.ipynb"]["error"] is None and chapters["b.ipynb"]["done"] == 1


def test_a_failing_cell_and_a_dying_process_are_recorded_and_the_next_chapter_runs(tmp_path):
    failing = chapter(tmp_path, "a.ipynb", "x = 1", "raise ValueError('planted')", "y = 2")
    dying = chapter(tmp_path, "b.ipynb", "import os\nos._exit(3)")
    fine = chapter(tmp_path, "c.ipynb", "z = 3")
    done, record = run(tmp_path, failing, dying, fine)
    chapters = record["chapters"]
    assert done.returncode == 1
    assert (
        chapters["a.ipynb"]["done"] == 1 and "ValueError: planted" in chapters["a.ipynb"]["error"]
    )
    assert chapters["b.ipynb"]["error"] == (
        "the chapter's process ended with status 3 before it finished"
    )
    assert chapters["c.ipynb"]["error"] is None


def test_skip_clean_goes_on_where_the_last_run_stopped_and_reasons_stay_until_a_clean_run(tmp_path):
    clean = chapter(tmp_path, "a.ipynb", "print('ran a')")
    failing = chapter(tmp_path, "b.ipynb", "print('ran b')\nraise ValueError('planted')")
    done, record = run(tmp_path, clean, failing)
    assert done.returncode == 1 and "ran a" in done.stdout
    record["reasons"] = {"a.ipynb": "stale", "b.ipynb": "fails a planted check"}
    (tmp_path / "record.json").write_text(json.dumps(record), encoding="utf-8")
    done, again = run(tmp_path, clean, failing, skip=True)
    assert "a.ipynb: recorded clean for this source, skipped" in done.stdout
    assert "ran a" not in done.stdout and "ran b" in done.stdout
    assert again["chapters"]["a.ipynb"] == record["chapters"]["a.ipynb"]
    assert again["reasons"] == record["reasons"]  # a skipped chapter keeps what was said of it
    chapter(tmp_path, "a.ipynb", "print('ran a, changed')")  # a new source runs again
    done, third = run(tmp_path, clean, skip=True)
    assert "ran a, changed" in done.stdout and third["reasons"] == {
        "b.ipynb": "fails a planted check"
    }
    assert third["chapters"]["a.ipynb"]["source"] != record["chapters"]["a.ipynb"]["source"]


def test_sigterm_stops_the_running_chapter_records_how_far_it_got_and_starts_no_other(tmp_path):
    slow = chapter(tmp_path, "a.ipynb", "x = 1", "print('cell 1 started', flush=True)\n"
                   "import time\ntime.sleep(120)", "y = 2")  # fmt: skip
    never = chapter(tmp_path, "b.ipynb", "print('ran b')")
    record = tmp_path / "record.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tools")])}
    env.pop("ANNOTATED_TRANSFORMER_PROFILE", None)
    runner = subprocess.Popen(
        [sys.executable, str(ROOT / "tools" / "run_chapters.py"), "--record", str(record),
         str(slow), str(never)],
        env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines = []
    for line in runner.stdout:  # wait until the chapter is inside its slow cell
        lines.append(line)
        if line.startswith("cell 1 started"):
            break
    runner.send_signal(signal.SIGTERM)  # the runner alone: it passes the signal on
    lines += runner.stdout.readlines()
    assert runner.wait(timeout=60) == 1
    outcome = json.loads(record.read_text(encoding="utf-8"))["chapters"]
    assert list(outcome) == ["a.ipynb"] and "ran b\n" not in lines
    assert outcome["a.ipynb"]["done"] == 1 and outcome["a.ipynb"]["cells"] == 3
    assert "Stopped: stopped by SIGTERM (a time cap)" in outcome["a.ipynb"]["error"]
    assert "stopped" not in outcome["a.ipynb"]  # (the runner's flag, not the record's)
    assert any(line.startswith("a.ipynb: 1/3 code cells") and "STOPPED" in line for line in lines)
    assert "stopped by SIGTERM: no further chapter runs\n" in lines


def test_a_chapter_that_ignores_sigterm_is_killed_after_the_grace(monkeypatch):
    import run_chapters

    monkeypatch.setattr(run_chapters, "GRACE", 1)
    code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(120)"
    child = subprocess.Popen([sys.executable, "-c", code])
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    assert run_chapters._wait(child) is True
    assert child.returncode == -signal.SIGKILL
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is put back
