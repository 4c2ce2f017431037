"""Decoding on single-threaded workers (chapter "Serving the model", `decoding.workers`): the same
translations for any number of workers and threads, and the workers' own bookkeeping."""

import time
from pathlib import Path

import pytest
import torch

from annotated_transformer.data.multi30k import read_split
from annotated_transformer.decoding import workers as workers_module
from annotated_transformer.decoding.batched import length_batches, translate_ids
from annotated_transformer.decoding.workers import decoding_workers, pieces, run_searches
from annotated_transformer.translator import Translator
from annotated_transformer.util import cores as cores_module
from annotated_transformer.util.cores import usable_cores

RECORDS = Path(__file__).resolve().parents[1] / "results" / "release"

# workers and threads take the machine's cores: they run alone, after the queue (tools/run_tests.py)
pytestmark = pytest.mark.serial


@pytest.fixture(scope="module")
def shipped() -> Translator:
    return Translator.pretrained(device="cpu")


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize(("threads", "workers"), [(1, 1), (2, 1), (2, 2)])
def test_test2016_translates_byte_for_byte_as_recorded(shipped, data_dir, restore_threads,
                                                       threads, workers):  # fmt: skip
    """All 1,000 sentences, greedy and beam 4: one search on 1 or 2 threads, or 2 workers."""
    german = [de for de, _ in read_split("test2016", data_dir)]
    torch.set_num_threads(threads)
    for beam, name in ((1, "greedy"), (4, "beam4")):
        recorded = (RECORDS / f"test2016-shipped-{name}.en").read_text(encoding="utf-8")
        found = translate_ids(shipped.model, shipped.encode(german), shipped.tgt_vocab,
                              max_len=shipped.config.model.max_len, max_tokens=shipped.max_tokens,
                              beam_size=beam, workers=workers)  # fmt: skip
        lines = [shipped.detokenize(tokens) for tokens in found]
        assert lines == recorded.splitlines(), (threads, workers, name)
        assert torch.get_num_threads() == threads  # the workers' threads left as they were


def test_pieces_split_the_largest_batch_until_each_worker_has_three_largest_first():
    batches = [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9]]
    lengths = [2] * 8 + [10, 10]  # padded positions: 16 and 20
    assert pieces(batches, 1, lengths) == batches  # one worker: as they are
    found = pieces(batches, 2, lengths)  # [8, 9] (20 positions) halved first, then the 16s
    assert found == [[8], [9], [0, 1], [2, 3], [4, 5], [6, 7]]  # three each, the largest first
    assert pieces([[0, 1], [2, 3]], 2, [1, 1, 1, 1]) == [[0], [1], [2], [3]]  # none left empty
    assert pieces([[0]], 4, [5]) == [[0]]  # a sentence is not split


def test_the_default_is_one_worker_per_thread_at_most_the_cores(monkeypatch, restore_threads):
    assert decoding_workers(torch.device("meta")) == 1  # not a CPU: one search at a time
    torch.set_num_threads(2)
    monkeypatch.setattr(workers_module, "usable_cores", lambda: 1)
    assert decoding_workers(torch.device("cpu")) == 1
    monkeypatch.setattr(workers_module, "usable_cores", lambda: 8)
    assert decoding_workers(torch.device("cpu")) == 2


def test_usable_cores_follows_the_cpu_quota(monkeypatch):
    monkeypatch.setattr(cores_module, "cpu_quota", lambda: 1.5)
    assert usable_cores() == 1
    monkeypatch.setattr(cores_module, "cpu_quota", lambda: None)
    assert usable_cores() == len(cores_module.os.sched_getaffinity(0))


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_workers_must_be_a_positive_integer(shipped, bad):
    (src,) = shipped.encode(["Ein Hund."])
    with pytest.raises(ValueError, match=f"workers must be a positive integer, got {bad!r}"):
        translate_ids(shipped.model, [src], shipped.tgt_vocab, max_len=64, workers=bad)


def test_an_error_stops_the_jobs_not_yet_begun(restore_threads):
    """A failing search (or Ctrl-C) ends the run: the queued jobs never run."""
    ran = []

    def search(job: int) -> list:
        if job == 0:
            raise MemoryError("a batch too large")
        time.sleep(0.01)
        ran.append(job)
        return []

    threads = torch.get_num_threads()
    with pytest.raises(MemoryError, match="a batch too large"):
        list(run_searches(search, list(range(100)), workers=2))
    assert len(ran) < 99 and torch.get_num_threads() == threads


def test_length_batches_sort_and_fill_to_the_budget():
    """`translate_ids`'s batches: every sentence once, shortest first, within the budget."""
    lengths = torch.tensor([5, 1, 3, 9, 2, 2])
    batches = length_batches(lengths, 6)
    assert sorted(i for b in batches for i in b) == list(range(6))
    flat = [int(lengths[i]) for b in batches for i in b]
    assert flat == sorted(flat) and all(len(b) * max(lengths[b].tolist()) <= 6 or len(b) == 1
                                        for b in batches)  # fmt: skip


def test_one_job_runs_on_the_callers_threads(restore_threads):
    """One job alone (one sentence, say) runs on the calling thread, with its threads: a worker of
    one thread would leave the others idle. Two jobs go to the workers."""
    import threading

    torch.set_num_threads(2)
    seen = []

    def search(job: int) -> list:
        seen.append((threading.current_thread(), torch.get_num_threads()))
        return [job]

    assert list(run_searches(search, [7], workers=2)) == [(7, [7])]
    assert seen == [(threading.current_thread(), 2)]
    seen.clear()
    assert list(run_searches(search, [1, 2], workers=2)) == [(1, [1]), (2, [2])]
    assert all(thread is not threading.current_thread() and n == 1 for thread, n in seen)


def test_the_translator_keeps_its_decoding_copy(monkeypatch):
    """`Translator.translate` makes the model with oneDNN's products once, not at every call."""
    from annotated_transformer.decoding import onednn

    made = []
    real = onednn.onednn_linears
    monkeypatch.setattr(onednn, "onednn_linears", lambda model: made.append(1) or real(model))
    translator = Translator.pretrained(device="cpu")  # (its own copy kept, none made yet)
    first = translator.translate(["Ein Hund rennt."], beam_size=1)
    assert translator.translate(["Ein Hund rennt."], beam_size=1) == first and len(made) == 1


def test_two_calls_at_once_give_the_sequential_results_and_leave_the_threads(
    shipped, restore_threads
):
    """Two threads of a caller translate at once (issue 59): each gets what it gets alone, and
    PyTorch's thread count is the one they found."""
    from concurrent.futures import ThreadPoolExecutor

    torch.set_num_threads(2)
    sources = shipped.encode([de for de, _ in read_split("test2016")[:24]])
    alone = [translate_ids(shipped.model, part, shipped.tgt_vocab, max_len=256, beam_size=2,
                           workers=2) for part in (sources[:12], sources[12:])]  # fmt: skip
    with ThreadPoolExecutor(2) as callers:
        both = list(callers.map(lambda part: translate_ids(
            shipped.model, part, shipped.tgt_vocab, max_len=256, beam_size=2, workers=2
        ), (sources[:12], sources[12:])))  # fmt: skip
    assert both == alone and torch.get_num_threads() == 2


def test_jobs_from_a_generator_are_taken_at_most_ahead_and_come_back_in_order(restore_threads):
    """A stream's chunks: `run_searches` takes jobs from a generator as workers need them, never
    more than `ahead` of them not yet given back, and gives the results in the jobs' order."""
    taken, given = [], []

    def jobs():
        for job in range(12):
            taken.append(job)
            yield job

    def search(job: int) -> list:
        time.sleep(0.002 * (job % 3))  # (unequal jobs: the later may end first)
        return [job * job]

    for job, found in run_searches(search, jobs(), workers=2, ahead=3):
        assert len(taken) - len(given) <= 3  # ahead of what has come back
        given.append((job, found))
    assert given == [(job, [job * job]) for job in range(12)]


def test_a_stream_may_translate_while_it_is_read(shipped, restore_threads):
    """The thread that reads a stream (which keeps its workers while it is read) may call
    `translate` between two of its translations: the pool's lock lets the same thread in."""
    import threading

    torch.set_num_threads(2)
    german = [de for de, _ in read_split("test2016")[:12]]
    found = {}

    def read() -> None:
        stream = shipped.translate_stream(german, chunk=3, beam_size=1)
        found["first"] = next(stream)
        found["inside"] = shipped.translate(german[:4], beam_size=1)[0]  # (pieces: workers)
        found["rest"] = list(stream)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=120)
    assert not reader.is_alive(), "translate inside a stream waited for the stream's own lock"
    assert found["inside"] == found["first"] == shipped.translate(german, beam_size=1)[0]
    assert [found["first"], *found["rest"]] == shipped.translate(german, beam_size=1)
    assert torch.get_num_threads() == 2
