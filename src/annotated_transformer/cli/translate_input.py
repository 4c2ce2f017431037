"""`translate`'s chunks of input: each translated and written in order, one output line per input
line, with the lines before a bad one written before the error. The first chunk has every
decoding worker on it; on a CPU with several, each chunk after it goes to a worker of its own
(`decoding.workers.run_searches`), so that none waits for the others at a chunk's end.

Hand-written; the chapter "Engineering a training run" teaches `translate`, "Serving the model"
the workers.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections import deque
from collections.abc import Iterator
from typing import NoReturn

from annotated_transformer.cli.common import LANGUAGE_NAMES, PROG, flush_stdout
from annotated_transformer.data.vocab import normalize, not_text
from annotated_transformer.util.errors import InputError, SentenceError


def _translate_chunk(translator, lines: list[str], first: int, args: argparse.Namespace) -> None:
    """Translate input lines `first`, `first + 1`, ... and write one output line for each (an
    empty line stays empty, and so does one that is not text), then flush, so that what is
    written is kept whatever comes next. A line that cannot be translated stops the chunk once
    every line before it is written. Messages name a line of standard input ("line 5"), or an
    argument ("argument 2")."""
    try:
        translations = _chunk_translations(translator, lines, args)
    except SentenceError as error:  # its index counts this chunk's sentences, from 1
        _refuse(translator, lines, first, args, error)
    _write_chunk(translator, lines, first, args, translations)


def _chunk_translations(translator, lines: list[str], args: argparse.Namespace) -> dict[int, str]:
    """The translations of a chunk's lines that are not empty, by their place in the chunk; a
    `SentenceError` for a sentence the model cannot read."""
    filled = [i for i, line in enumerate(lines) if normalize(line)]
    check_characters(translator, [lines[i] for i in filled])
    outputs = translator.translate(
        [lines[i] for i in filled], beam_size=args.beam, alpha=args.alpha,
        keep_greedy=args.keep_greedy, progress=bool(args.text) and sys.stderr.isatty(),
        search=args.search,
    )  # fmt: skip
    return dict(zip(filled, outputs, strict=True))


def _refuse(translator, lines: list[str], first: int, args: argparse.Namespace,
            error: SentenceError) -> NoReturn:  # fmt: skip
    """Translate and write the lines of a chunk before the one `error` refuses, then raise the
    `InputError` that names that line."""
    unit = "argument" if args.text else "line"
    refused = [i for i, line in enumerate(lines) if normalize(line)][error.index - 1]
    if refused > 0:  # the lines before it: translated and written first
        _translate_chunk(translator, lines[:refused], first, args)
    raise InputError(f"{unit} {first + refused} {error.problem}") from None


def _write_chunk(translator, lines: list[str], first: int, args: argparse.Namespace,
                 translations: dict[int, str]) -> None:  # fmt: skip
    """Warn about the chunk's lines on standard error, write one output line for each, flush."""
    warn_about_lines(translator, lines, first, "argument" if args.text else "line")
    for i in range(len(lines)):
        print(translations.get(i, ""))
    flush_stdout()


def translate_chunks(translator, chunks: Iterator[tuple[list[str], int]],
                      args: argparse.Namespace) -> None:  # fmt: skip
    """Translate and write every chunk (its lines, and the number of its first), in order. The
    first has every decoding worker on it. On a CPU with several, each chunk after it goes to a
    worker of its own, `workers` at once, so that none waits for the others at a chunk's end
    (`run_searches`, as `Translator.translate_stream` does); each is written as soon as it and
    those before it are done, and the input is read at most two chunks a worker ahead."""
    lines, first = next(chunks)
    _translate_chunk(translator, lines, first, args)
    workers = _chunk_workers(translator)
    if workers == 1:
        for lines, first in chunks:
            _translate_chunk(translator, lines, first, args)
        return
    from annotated_transformer.decoding.workers import run_searches

    one = copy.copy(translator)  # the same model, for a worker: one search at a time
    one.workers = 1
    taken: deque[tuple[list[str], int]] = deque()  # the chunks taken, not yet written

    def noted() -> Iterator[tuple[list[str], int]]:
        for chunk in chunks:
            taken.append(chunk)
            yield chunk

    search = lambda chunk: _chunk_translations(one, chunk[0], args)  # noqa: E731
    done = run_searches(search, noted(), workers, ahead=2 * workers)  # (chunk, translations)
    try:
        for (lines, first), translations in done:
            taken.popleft()
            _write_chunk(translator, lines, first, args, translations)
    except SentenceError as error:  # (the chunks before it are written: results come in order)
        lines, first = taken[0]
        _refuse(translator, lines, first, args, error)


def _chunk_workers(translator) -> int:
    """How many chunks `translate_chunks` translates at once: our `Translator`'s decoding
    workers on a CPU (see `translate_ids`); one for a CTranslate2 export, whose threads are its
    own, and on a GPU."""
    from annotated_transformer.decoding.workers import decoding_workers
    from annotated_transformer.translator import Translator

    if not isinstance(translator, Translator):
        return 1
    return translator.workers or decoding_workers(translator.device)


def numbered(chunks: Iterator[list[str]], read: int) -> Iterator[tuple[list[str], int]]:
    """Each chunk with the number of its first line, after `read` lines."""
    for chunk in chunks:
        yield chunk, read + 1
        read += len(chunk)


CHARACTERS_PER_WORD = 64  # the most characters a word model's token is taken to hold


def check_characters(translator, sentences: list[str]) -> None:
    """Refuse, before it is tokenized, a sentence of more characters than the model's `max_len`
    tokens can hold (`SentenceError`): a BPE piece holds at most as many as the longest in the
    vocabulary, a word at most `CHARACTERS_PER_WORD`. A line of megabytes is refused at once."""
    max_len = translator.config.model.max_len
    widest = (max(map(len, translator.bpe.vocab.itos)) if translator.bpe is not None
              else CHARACTERS_PER_WORD)  # fmt: skip
    most = (max_len - 1) * widest
    for i, sentence in enumerate(sentences, 1):
        size = len(normalize(sentence))
        if size > most:
            raise SentenceError(i, f"has {size:,} characters, more than this model's {max_len - 1} "
                                f"tokens can hold ({most:,}: at most {widest} characters a "
                                f"token); split it into sentences, one per line")  # fmt: skip


def warn_about_lines(translator, lines: list[str], first: int, unit: str) -> None:
    """On standard error: the words of each line that the model reads as `<unk>`, and each line
    read as blank because it is not text (a NUL, a terminal's escape sequence)."""
    source = LANGUAGE_NAMES[translator.config.languages[0]] if translator else ""
    for i, line in enumerate(lines):
        unknown = translator.unknown_words(line) if translator and normalize(line) else []
        if unknown:
            print(f"{PROG}: warning: {unit} {first + i}: {len(unknown)} word(s) not in the "
                  f"{source} vocabulary, read as <unk>: {', '.join(unknown)}",
                  file=sys.stderr)  # fmt: skip
        if (problem := not_text(line)) is not None:
            print(f"{PROG}: warning: {unit} {first + i} {problem}: not text, so read as a "
                  f"blank line", file=sys.stderr)  # fmt: skip
