"""`benchmarks/decoding_threads.py`: each way in a process of its own, the record's fields."""

import argparse
import json

import decoding_threads
import pytest

# workers and threads take the machine's cores: they run alone, after the queue (tools/run_tests.py)
pytestmark = pytest.mark.serial


def test_a_way_runs_in_its_own_process_with_its_wait_policy(data_dir, monkeypatch):
    monkeypatch.setenv("ANNOTATED_TRANSFORMER_MULTI30K", str(data_dir))
    args = argparse.Namespace(split="test2016", limit=4)
    found = decoding_threads.measure("one search, 2 threads, passive wait", args)
    assert found["sentences"] == 4 and set(found["seconds"]) == {"greedy", "beam 4"}
    assert all(seconds > 0 for seconds in found["seconds"].values())


def test_the_record_holds_every_way_idle_and_busy(tmp_path, monkeypatch, capsys):
    calls = []

    def fake(way, args):  # a way's process, without the model: 10 sentences in 1 or 2 s
        calls.append(way)
        return {"sentences": 10, "seconds": {"greedy": 1.0, "beam 4": 2.0}}

    monkeypatch.setattr(decoding_threads, "measure", fake)
    out = tmp_path / "threads.json"
    argv = ["--rounds", "2", "--busy", "1", "--limit", "10", "--output", str(out)]
    assert decoding_threads.main(argv) == 0
    record = json.loads(out.read_text())
    assert len(calls) == 2 * 2 * len(decoding_threads.WAYS)  # rounds x (idle, busy) x ways
    assert list(record["results"]) == list(decoding_threads.WAYS)
    row = record["results"]["2 workers of 1 thread"]["beam 4"]
    assert row["idle"]["sentences_per_second"] == row["busy"]["sentences_per_second"] == 5.0
    assert row["busy / idle"] == 1.0 and row["idle"]["spread"] == [5.0, 5.0]
    assert record["machine"]["busy"]["busy_niceness"] == [0]
    assert record["command"].startswith("python benchmarks/decoding_threads.py --rounds 2")
    assert "busy/idle" in capsys.readouterr().out
