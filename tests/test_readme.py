"""Every snippet of the README runs as written.

The test reads the README's ```python and ```bash blocks, in order, and runs them in one scratch
folder, so a run folder that one block trains is there for the next. Long runs are shortened the
to a `tiny` run of five steps; the commands that cannot run here
are listed in EXEMPT with the reason, and the test fails if an exemption no longer matches a
command (so the list cannot go stale).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"^```(python|bash)\n(.*?)^```", re.S | re.M)

# A command that starts with one of these is not run here, for the reason given.
EXEMPT = {
    "bash tools/book.sh": "README command (1): tests/test_browser.py builds the book",
    "bash tools/test.sh": "README command (2): this test runs inside it",
    "python3.11 -m venv": "sets up a second environment; tools/setup.sh does the same",
    "pip install": "installs from the network; the wheel is built by tests/test_package.py",
    "jupyter lab": "opens an interactive server",
    "annotated-transformer download": "downloads Multi30k; tests read ../shared/data/multi30k",
    "torchrun --standalone --nproc_per_node 8": "8 processes; tests/test_real_world.py runs 2",
    "python tools/export.py": "tests/test_export.py runs it on a copy; the appendix runs --check",
    "curl": "downloads the 2022 file; tests/test_benchmarks.py uses a local copy",
    "python benchmarks/train.py": "minutes; tests/test_benchmarks.py runs it small",
    "python benchmarks/decoding.py": "minutes; tests/test_benchmarks.py runs it small",
    "annotated-transformer grid": "the Table 3 grid, an hour; tests/test_beyond.py runs a row",
}
SHORTEN = [  # long runs, shortened
    # five steps, a checkpoint each, so that `average --last 5` has five to average
    (re.compile(r"--preset (small|base|big)\b"), "--preset tiny --max-steps 5 --set save_every=1"),
    # every split of Multi30k is five translations of a thousand sentences by a model of five
    # steps: two splits prove the same (several splits, one record each)
    (re.compile(r"--split all\b"), "--split mscoco test2017"),
]


def blocks() -> list[tuple[str, str]]:
    return [(kind, body) for kind, body in BLOCK.findall(README.read_text(encoding="utf-8"))]


def commands(body: str) -> list[str]:
    """The commands of a bash block: continuation lines joined, blank lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", body)
    return [line.strip() for line in joined.splitlines() if line.strip()]


def exempt(command: str) -> str | None:
    return next((why for start, why in EXEMPT.items() if command.startswith(start)), None)


def shortened(command: str) -> str:
    for pattern, replacement in SHORTEN:
        command = pattern.sub(replacement, command)
    return command


def test_every_exemption_matches_a_readme_command() -> None:
    all_commands = [c for kind, body in blocks() if kind == "bash" for c in commands(body)]
    unused = [start for start in EXEMPT if not any(c.startswith(start) for c in all_commands)]
    assert not unused, f"EXEMPT lists commands the README no longer has: {unused}"


def test_every_readme_snippet_runs(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    ran = 0
    for kind, body in blocks():
        if kind == "python":
            steps = [[sys.executable, "-c", body]]
        else:
            runnable = [shortened(c) for c in commands(body) if exempt(c) is None]
            steps = [["bash", "-c", f"set -euo pipefail; {c}"] for c in runnable]
        for step in steps:
            result = subprocess.run(
                step, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
            )
            shown = step[-1] if kind == "bash" else body
            assert result.returncode == 0, (
                f"README snippet failed:\n{shown}\n--- stderr ---\n{result.stderr[-3000:]}"
            )
            assert "Traceback" not in result.stderr, shown
            ran += 1
    print(f"{ran} README snippets ran")
    assert ran >= 10


@pytest.mark.parametrize("command", ["annotated-transformer --help"])
def test_help_lists_every_command(command: str) -> None:
    out = subprocess.run(
        [Path(sys.executable).parent / "annotated-transformer", *shlex.split(command)[1:]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = ("info", "download", "train", "translate", "evaluate", "average", "attention",
             "save-pretrained", "grid")  # fmt: skip
    for name in names:
        assert name in out
