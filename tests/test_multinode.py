"""Many machines through torchrun (issue 35): `annotated-transformer train` run by two torchrun
launches of one process each, as two "machines" would run it (`--nnodes 2`, a c10d rendezvous on
localhost, gloo), trains what one process with twice the accumulation trains, and resumes exactly
after both are killed.

The data is a few hundred synthetic sentence pairs (a sitecustomize.py that the processes load
replaces `multi30k.read_split`), so that each launch takes seconds and no Multi30k is needed.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from annotated_transformer.runs.checkpoints import list_checkpoints

STEPS = 12  # optimizer steps of every run here
SITECUSTOMIZE = '''\
"""Loaded by the test's training processes only: every split is the same synthetic pairs."""
from annotated_transformer.data import multi30k

_DE = {"dog": "Hund", "cat": "Katze", "man": "Mann", "woman": "Frau", "child": "Kind"}
_VERBS = {"runs": "rennt", "sleeps": "schläft", "laughs": "lacht", "waits": "wartet"}
_PLACES = {"": "", " outside": " draußen", " here": " hier", " again": " wieder"}
_PAIRS = [(f"Ein {_DE[n]} {_VERBS[v]}{_PLACES[p]}.", f"A {n} {v}{p}.")
          for n in _DE for v in _VERBS for p in _PLACES] * 5


def _read_split(split, data_dir=None, pair="de-en"):
    return [(s, t) if pair == "de-en" else (t, s) for s, t in _PAIRS]


multi30k.read_split = _read_split
'''


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("synthetic-data")
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}


def train_args(run_dir: Path, *extra: str) -> list[str]:
    return [
        "-m", "annotated_transformer", "train", "--preset", "tiny", "--out", str(run_dir),
        "--max-steps", str(STEPS), "--max-tokens", "256", "--dropout", "0", "--device", "cpu",
        "--set", "save_every=3", "--set", "eval_every=1000", "--set", "bleu_sentences=4",
        "--no-progress", *extra,
    ]  # fmt: skip


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def start_two_nodes(run_dir: Path, env: dict[str, str], *extra: str) -> list[subprocess.Popen]:
    """Two torchrun launches, as on two machines: one process each, meeting at a free port."""
    port = free_port()
    torchrun = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"localhost:{port}",
        "--rdzv-id", f"test-{port}", "--rdzv-conf", "join_timeout=120", "--max-restarts", "0",
    ]  # fmt: skip
    command = [*torchrun, *train_args(run_dir, *extra)]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    return [subprocess.Popen(command, env=env, start_new_session=True, **pipes) for _ in range(2)]


def workers(agent: subprocess.Popen) -> list[int]:
    """The processes a torchrun agent started (each in a session of its own)."""
    children = Path(f"/proc/{agent.pid}/task/{agent.pid}/children")
    return [int(pid) for pid in children.read_text().split()] if children.exists() else []


def finish(agents: list[subprocess.Popen], timeout: float = 240) -> list[str]:
    """Wait for both launches; on a timeout or a failure, kill what is left and fail."""
    errors = []
    try:
        for agent in agents:
            _, err = agent.communicate(timeout=timeout)
            errors.append(err)
    finally:
        kill(agents)
    for agent, err in zip(agents, errors, strict=True):
        assert agent.returncode == 0, err[-3000:]
    return errors


def kill(agents: list[subprocess.Popen]) -> None:
    """SIGKILL the training processes first (they are not in the agents' sessions), then the
    agents: the whole job dies at once, as when machines lose power."""
    for pid in [pid for agent in agents if agent.poll() is None for pid in workers(agent)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for agent in agents:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.communicate()


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    payload = torch.load(list_checkpoints(run_dir)[-1], weights_only=True)
    assert payload["train_state"]["step"] == STEPS
    return payload["model"]


@pytest.fixture(scope="module")
def two_nodes(environment: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run on two "machines" of one process each, from start to end."""
    run_dir = tmp_path_factory.mktemp("two-nodes") / "run"
    finish(start_two_nodes(run_dir, environment))
    return run_dir


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds processes in /proc")
def test_two_nodes_train_what_one_process_with_twice_the_accumulation_trains(
    two_nodes, environment, tmp_path
):
    one = tmp_path / "one"
    subprocess.run(
        [sys.executable, *train_args(one, "--accumulate", "2")], env=environment, check=True,
        capture_output=True, timeout=240,
    )  # fmt: skip
    alone, together = weights(one), weights(two_nodes)
    assert alone.keys() == together.keys()
    for name, weight in alone.items():
        torch.testing.assert_close(together[name], weight, rtol=0, atol=1e-5)
    run = (two_nodes / "run.json").read_text(encoding="utf-8")
    assert '"processes": 2' in run


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds processes in /proc")
def test_two_nodes_killed_and_resumed_continue_exactly(two_nodes, environment, tmp_path):
    killed = tmp_path / "killed"
    agents = start_two_nodes(killed, environment)
    try:
        deadline = time.monotonic() + 240
        while not list_checkpoints(killed):
            assert all(agent.poll() is None for agent in agents), agents[0].communicate()[1]
            assert time.monotonic() < deadline, "no checkpoint within 4 minutes"
            time.sleep(0.01)
    finally:
        kill(agents)
    stopped_at = torch.load(list_checkpoints(killed)[-1], weights_only=True)["train_state"]
    assert stopped_at["step"] < STEPS, "the run ended before it was killed"
    errors = finish(start_two_nodes(killed, environment, "--resume"))
    assert any(f"(step {stopped_at['step']}," in err for err in errors)  # rank 0's "resume: ..."
    whole, resumed = weights(two_nodes), weights(killed)
    for name, weight in whole.items():
        assert torch.equal(resumed[name], weight), name


def test_machines_that_do_not_share_the_run_folder_are_stopped(monkeypatch, tmp_path):
    """Rank 1 of a resumed run on a machine that does not see the run folder would start afresh
    at step 0 while rank 0 resumes: `check_same_start` stops them, naming the steps."""
    from types import SimpleNamespace

    from annotated_transformer.training import run as trainer

    monkeypatch.setattr(trainer, "gather", lambda value, procs: [value, 0])
    resumed = SimpleNamespace(run_dir=tmp_path, procs=None, state=SimpleNamespace(step=6))
    with pytest.raises(ValueError, match=r"start from steps \[6, 0\] \(by rank\): every machine"):
        trainer.check_same_start(resumed)
    trainer.check_same_start(SimpleNamespace(run_dir=tmp_path, procs=None,
                                             state=SimpleNamespace(step=0)))  # fmt: skip
