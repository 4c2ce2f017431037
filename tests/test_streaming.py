"""`translate` streams (issue 45): standard input is read, translated and written a chunk at a
time, so a long input keeps memory bounded, the first translation comes while the input is still
open, and Ctrl-C keeps every line already written.

The model is the tiny 0.1.0 run of the fixtures, decoding greedily. For the memory test its
generator is made to end every sentence at once, so that 20,000 lines take seconds: what memory
would grow with is the input read ahead, the encoded sentences and the outputs held.
"""

from __future__ import annotations

import copy
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from annotated_transformer.data.vocab import EOS_ID
from annotated_transformer.translator import translate_in_chunks

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "tests" / "fixtures" / "checkpoint-0.1.0" / "word"
SENTENCE = "Ein Hund rennt über die Wiese."
TRANSLATE = [sys.executable, "-m", "annotated_transformer", "translate", "--checkpoint", str(RUN)]
GREEDY = ["--beam", "1", "--device", "cpu"]
LIMIT_S = 300  # a generous limit for a busy machine; no timing is asserted


def start(*options: str, run: Path = RUN) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [*TRANSLATE[:-1], str(run), *GREEDY, *options],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def read_line(stream, limit_s: float = LIMIT_S) -> bytes:
    """One line of `stream`, waited for at most `limit_s` (a thread, so the test cannot hang)."""
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(limit_s)
    assert got, f"no line within {limit_s} s"
    return got[0]


def test_the_first_translation_comes_while_the_input_is_still_open() -> None:
    process = start()
    try:
        process.stdin.write(f"{SENTENCE}\n".encode())
        process.stdin.flush()  # and the pipe stays open
        first = read_line(process.stdout)
        assert first.strip() and process.poll() is None  # translated, still reading
        process.stdin.write(f"\n{SENTENCE}\n".encode())
        process.stdin.close()
        rest = process.stdout.read().decode().splitlines()
        assert process.wait(LIMIT_S) == 0
        assert rest == ["", first.decode().rstrip("\n")]  # the empty line kept; same sentence
    finally:
        process.kill()


def test_ctrl_c_keeps_the_lines_already_written() -> None:
    process = start("--chunk", "2")
    try:
        process.stdin.write(f"{SENTENCE}\n{SENTENCE}\n{SENTENCE}\n".encode())
        process.stdin.flush()
        written = [read_line(process.stdout) for _ in range(3)]
        process.send_signal(signal.SIGINT)
        process.wait(LIMIT_S)  # standard input still open: only the interrupt can end it
        out, err = process.stdout.read(), process.stderr.read()
        assert process.returncode == 130 and err.decode().rstrip().endswith("interrupted")
        assert len(written) == 3 and all(line.strip() for line in written) and out == b""
    finally:
        process.kill()


# Ctrl-C while the main thread waits, with the signal handed to another thread of the process
# (the kernel may give it to any): `POKE` sends SIGINT to a thread of its own after a second.
POKE = """
import signal, threading, time
def poke():
    time.sleep(1)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)
threading.Thread(target=poke, daemon=True).start()
"""
WAITS = {
    "for a job": """
from annotated_transformer.decoding.workers import run_searches
def jobs():
    yield 1
    threading.Event().wait()  # standard input left open: no next job, ever
for job, found in run_searches(lambda job: [job], jobs(), 2, ahead=4):
    print("translated", job, flush=True)
""",
    "for a line": """
from annotated_transformer.cli.standard_input import stdin_chunks
next(stdin_chunks(2))  # standard input open, and nothing on it
""",
}


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="signal.pthread_kill: POSIX")
@pytest.mark.parametrize("waiting", list(WAITS))
def test_ctrl_c_given_to_another_thread_still_stops_the_wait(waiting: str) -> None:
    """A wait without a timeout would sleep through it, for ever (issue 61's CI run hung so)."""
    script = f"{POKE}\ntry:\n" + "".join(f"    {line}\n" for line in WAITS[waiting].splitlines())
    script += "except KeyboardInterrupt:\n    print('interrupted', flush=True)\n"
    process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:  # (standard input stays open until the end)
        process.wait(LIMIT_S)
        out, err = process.stdout.read().decode(), process.stderr.read().decode()
        assert out.splitlines()[-1:] == ["interrupted"], (out, err[-2000:])
    finally:
        process.kill()


@pytest.fixture(scope="module")
def brief_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture's run, its generator biased to end every sentence at its first step."""
    run = tmp_path_factory.mktemp("brief") / "run"
    shutil.copytree(RUN, run)
    path = run / "checkpoint-00000002.pt"
    payload = torch.load(path, weights_only=True)
    payload["model"]["generator.proj.bias"][EOS_ID] = 1e4
    torch.save(payload, path)
    return run


def max_rss_kb(run: Path, lines: int) -> int:
    """The largest resident memory of `translate` over `lines` input lines, from the kernel."""
    process = start(run=run)

    def feed() -> None:
        process.stdin.write(f"{SENTENCE}\n".encode() * lines)
        process.stdin.close()

    threading.Thread(target=feed, daemon=True).start()
    count = sum(1 for _ in process.stdout)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0 and count == lines, process.stderr.read().decode()[-500:]
    return usage.ru_maxrss


@pytest.mark.skipif(not hasattr(os, "wait4"), reason="os.wait4: the child's own peak memory")
def test_memory_stays_bounded_however_long_the_input(brief_run: Path) -> None:
    short, long = max_rss_kb(brief_run, 2_000), max_rss_kb(brief_run, 20_000)
    print(f"\nmax RSS: {short} KB for 2,000 lines, {long} KB for 20,000")
    assert long <= 1.10 * short


def translate_input(data: bytes, run: Path) -> tuple[int, list[bytes], str, int]:
    """`translate` of `data` on standard input: its exit status, output lines, standard error
    and largest resident memory in KB (from the kernel: the child's own peak)."""
    process = start(run=run)

    def feed() -> None:
        try:
            process.stdin.write(data)
            process.stdin.close()
        except BrokenPipeError:  # (it stopped reading: refused)
            pass

    errors: list[bytes] = []  # (read beside standard output: a full pipe would stall it)
    threading.Thread(target=feed, daemon=True).start()
    reader = threading.Thread(target=lambda: errors.append(process.stderr.read()), daemon=True)
    reader.start()
    lines = process.stdout.read().splitlines()
    reader.join(LIMIT_S)
    stderr = errors[0].decode()
    _, status, usage = os.wait4(process.pid, 0)
    return os.waitstatus_to_exitcode(status), lines, stderr, usage.ru_maxrss


@pytest.mark.skipif(not hasattr(os, "wait4"), reason="os.wait4: the child's own peak memory")
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (b"M\xe4nner rennen.", "standard input is not UTF-8 text (line 1015: invalid continuation"),
        (b"Hund " * 400, "line 1015 has 400 tokens; this model reads at most 255"),
        (b"\x07" * 20_000, None),  # not text: an empty line, and on to the end
    ],
)
def test_every_line_before_a_bad_one_is_written_first(bad, message) -> None:
    """1,100 lines (chunks of 500: lines 1,001 to 1,100 one chunk), line 1,015 bad: the 1,014
    before it are translated and written before the error, whatever the chunk and the block
    of 64 KB that the bad bytes fall in."""
    lines = [SENTENCE.encode()] * 1100
    lines[1014] = bad
    status, out, stderr, _ = translate_input(b"\n".join(lines) + b"\n", RUN)
    if message is None:
        assert status == 0 and len(out) == 1100 and out[1014] == b"", stderr[-500:]
        assert "line 1015 holds a control character U+0007 at character 1: not text" in stderr
        return
    assert status == 1 and len(out) == 1014 and all(out), stderr[-500:]
    assert stderr.splitlines()[-1].startswith(f"annotated-transformer: error: {message}")


@pytest.mark.skipif(not hasattr(os, "wait4"), reason="os.wait4: the child's own peak memory")
def test_a_line_of_20_mb_is_refused_in_bounded_memory() -> None:
    """A line of 20 MB after a sentence: the sentence is written, and the line refused once
    `LONGEST_LINE` characters of it are read (in time linear in them), its tokens never made.
    The peak memory is compared with one sentence's: no timing is asserted."""
    _, _, _, one = translate_input(f"{SENTENCE}\n".encode(), RUN)
    status, out, stderr, peak = translate_input(
        f"{SENTENCE}\n".encode() + b"Hund " * 4_000_000 + b"\n", RUN
    )
    print(f"\nmax RSS: {one} KB for one sentence, {peak} KB with a line of 20 MB after it")
    assert status == 1 and len(out) == 1 and out[0], stderr[-500:]
    assert "line 2 is longer than 4,194,304 characters" in stderr.splitlines()[-1]
    assert peak < one + 200_000  # KB: the line read so far, not 2.9 GB of tokens


def test_chunks_on_workers_give_one_chunks_translations_and_stop_at_a_bad_line() -> None:
    """Chunks of 2 lines: the first on every worker, the next a worker each (two threads, two
    workers): the same lines as one chunk gives; a line it cannot read (line 8, in the fourth
    chunk) stops it after the 7 before it are written, whatever the chunks after it."""
    lines = [SENTENCE, "Eine Frau lacht.", "", "Zwei Kinder spielen.", "Ein Mann liest."] * 3
    data = "\n".join(lines).encode() + b"\n"
    whole = subprocess.run([*TRANSLATE, *GREEDY, "--chunk", "500"], input=data,
                           capture_output=True, timeout=LIMIT_S)  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    small = subprocess.run([*TRANSLATE, *GREEDY, "--chunk", "2"], input=data,
                           capture_output=True, timeout=LIMIT_S, env=env)  # fmt: skip
    assert whole.returncode == small.returncode == 0, small.stderr.decode()[-500:]
    assert small.stdout == whole.stdout and len(whole.stdout.splitlines()) == len(lines)
    lines[7] = "Hund " * 400
    data = "\n".join(lines).encode() + b"\n"
    bad = subprocess.run([*TRANSLATE, *GREEDY, "--chunk", "2"], input=data,
                         capture_output=True, timeout=LIMIT_S, env=env)  # fmt: skip
    assert bad.returncode == 1 and bad.stdout.splitlines() == whole.stdout.splitlines()[:7]
    assert "error: line 8 has 400 tokens" in bad.stderr.decode().splitlines()[-1]


def test_chunk_must_be_a_positive_count() -> None:
    result = subprocess.run(
        [*TRANSLATE, "--chunk", "0", SENTENCE], capture_output=True, text=True, timeout=LIMIT_S
    )
    assert result.returncode == 2 and "--chunk: expected a positive integer" in result.stderr


# --- the Python API: Translator.translate_stream -------------------------------------------------


@pytest.fixture(scope="module")
def translator():
    from annotated_transformer.translator import Translator

    return Translator.from_checkpoint(RUN, device="cpu")


@pytest.mark.parametrize("workers", [1, 2])
def test_translate_stream_reads_two_chunks_a_worker_ahead_and_gives_what_translate_gives(
    translator, workers
):
    """One worker reads a chunk ahead of what it gives; two, each translating chunks of its own,
    read two chunks (of 4 sentences, here), and at most two each before the first translation
    comes."""
    sentences = [SENTENCE, "", "Eine Frau lacht.", "  ", "Zwei Kinder spielen."] * 5
    pulled = []

    def source():  # a generator that notes how far it has been read
        for sentence in sentences:
            pulled.append(sentence)
            yield sentence

    chosen = copy.copy(translator)
    chosen.workers = workers
    stream = chosen.translate_stream(source(), chunk=4, beam_size=1)
    first = next(stream)
    if workers == 1:
        assert len(pulled) == 4  # one chunk
    else:  # two chunks read at once, then at most two a worker
        assert 2 * 4 <= len(pulled) <= 2 * workers * 4
    rest = list(stream)
    whole = translator.translate([s for s in sentences if s.strip()], beam_size=1)
    expected = iter(whole)
    assert [first, *rest] == [next(expected) if s.strip() else "" for s in sentences]


@pytest.mark.parametrize(
    ("sentences", "chunk", "error", "message"),
    [
        ("Ein Hund.", 4, TypeError, "not one string"),
        ([SENTENCE], 0, ValueError, "chunk must be a positive integer, got 0"),
        ([SENTENCE], True, ValueError, "chunk must be a positive integer, got True"),
    ],
)
def test_translate_stream_refuses_what_it_cannot_stream(
    translator, sentences, chunk, error, message
):
    with pytest.raises(error, match=message):
        next(translator.translate_stream(sentences, chunk=chunk))


def test_translate_stream_of_nothing_is_nothing(translator):
    assert list(translator.translate_stream(iter([]))) == []
    assert list(translator.translate_stream(["", " "])) == ["", ""]


def _upper(calls: list, who: str):
    return lambda batch: calls.append((who, len(batch))) or [s.upper() for s in batch]


def test_one_chunk_goes_to_every_worker_and_more_to_a_worker_each():
    """`translate_in_chunks`: a text of one chunk goes to `translate` (every worker on it); a
    longer one, chunk by chunk, to `one_worker`, in order, "" for an empty line."""
    calls: list = []
    every, one = _upper(calls, "every"), _upper(calls, "one")
    assert list(translate_in_chunks(every, ["a", "", "b"], 4, one, workers=2)) == ["A", "", "B"]
    assert calls == [("every", 2)]
    calls.clear()
    found = list(translate_in_chunks(every, list("abcdefghij"), 4, one, workers=2))
    assert found == list("ABCDEFGHIJ") and sorted(calls) == [("one", 2), ("one", 4), ("one", 4)]


def test_a_chunk_comes_as_soon_as_it_is_done_however_slowly_the_next_comes():
    """A source that stalls (a pipe fed slowly): the chunks already read are given back without
    waiting for the next line."""
    calls: list = []
    gate, opened = threading.Event(), []

    def source():
        yield from "abcd"  # two chunks of two
        opened.append(gate.wait(timeout=60))  # the next line: only once the first is out
        yield "e"

    stream = translate_in_chunks(_upper(calls, "every"), source(), 2, _upper(calls, "one"), 2)
    assert next(stream) == "A"
    gate.set()
    assert list(stream) == list("BCDE") and opened == [True]  # (True: set here, not timed out)
