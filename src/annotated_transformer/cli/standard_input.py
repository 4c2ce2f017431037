"""`translate`'s standard input: read from its file descriptor as UTF-8 whatever the locale, cut
into lines (CR, CRLF and LF), and handed over in chunks of at most `--chunk` lines by a reading
thread, so that each translation is written while the input is still open. It reads in time
linear in the input, gives every whole line before bytes that are not UTF-8, and refuses a line
longer than any model reads before reading the rest of it.

Hand-written; the chapter "Engineering a training run" teaches `translate`.
"""

from __future__ import annotations

import codecs
import io
import itertools
import os
import re
import sys
from collections.abc import Iterator

from annotated_transformer.cli.common import PROG
from annotated_transformer.util.errors import InputError

_LINE_END = re.compile(r"\r\n|\r|\n")
_END_OF_INPUT = object()  # what the reader of standard input sends after the last line
CHUNK_LINES = 500  # `translate --chunk`: lines read, translated and written at a time
# The longest line read: 64 characters for each of the 65,536 positions of the longest model
# (model.model_checks.MAX_POSITIONS, not imported here). Longer, a line is refused
# before the rest of it is read; `translate` refuses shorter ones by the model's own max_len.
LONGEST_LINE = 64 * 65_536


def _stdin_blocks() -> Iterator[bytes | str]:
    """Standard input as it arrives: blocks of bytes read from its file descriptor, or a text
    stream's lines where it has none. Reading the descriptor takes no lock of Python's, so a
    thread blocked on it cannot stall the interpreter's exit (Ctrl-C while it waits)."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        buffer = getattr(sys.stdin, "buffer", None)  # (a text stream over bytes: its bytes, so
        if buffer is None:  # that they are decoded here, as the descriptor's are)
            yield from sys.stdin
            return
        read = getattr(buffer, "read1", buffer.read)  # (read1: what has come, not 64 KiB)
        while block := read(1 << 16):
            yield block
        return
    while block := os.read(fd, 1 << 16):
        yield block


def _stdin_lines() -> Iterator[str]:
    """Standard input's lines as they arrive, read as UTF-8 whatever the locale; CR, CRLF and LF
    all end a line. Bytes that are not UTF-8 stop it after every whole line before them."""
    if sys.stdin is None:
        raise OSError(
            "standard input is closed: give the sentences as arguments, or one per line on "
            "standard input"
        )
    if sys.stdin.isatty():
        print(f"{PROG}: reading sentences to translate, one per line; end with Ctrl-D",
              file=sys.stderr)  # fmt: skip
    lines = LineSplitter()
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for block in itertools.chain(_stdin_blocks(), [b""]):  # b"": the end, told the decoder
            try:
                text = decoder.decode(block, final=not block) if isinstance(block, bytes) else block
            except UnicodeDecodeError as error:  # the lines before the bad byte, then the error
                yield from lines.split(error.object[: error.start].decode("utf-8"))
                raise InputError(f"standard input is not UTF-8 text (line {lines.number + 1}: "
                                 f"{error.reason})") from None  # fmt: skip
            yield from lines.split(text)
        yield from lines.end()
    except OSError as error:
        raise OSError(f"cannot read standard input: {error.strerror or error}") from None


class LineSplitter:
    """Text in blocks, cut into lines in time linear in its length: a line's parts are kept in
    a list and joined once, at its end. A line longer than `LONGEST_LINE` characters is refused
    as soon as that many have come, without reading the rest."""

    def __init__(self) -> None:
        self.parts: list[str] = []  # the line so far
        self.size = 0  # its characters
        self.number = 0  # the lines given so far
        self.after_cr = False  # the last block ended with \r: a \n first in the next is its end

    def split(self, text: str) -> Iterator[str]:
        """The lines that `text` ends, given the blocks before it."""
        if not text:  # (a block of part of a character)
            return
        if self.after_cr and text.startswith("\n"):
            text = text[1:]
        self.after_cr, start = text.endswith("\r"), 0
        for end in _LINE_END.finditer(text):
            yield self.line(text[start : end.start()])
            start = end.end()
        self.keep(text[start:])

    def keep(self, part: str) -> None:
        """Add `part` to the line being read, refusing a line that grows too long."""
        self.size += len(part)
        if self.size > LONGEST_LINE:
            raise InputError(
                f"standard input: line {self.number + 1} is longer than {LONGEST_LINE:,} "
                f"characters, more than any model reads; split it into sentences, one per line"
            )
        if part:
            self.parts.append(part)

    def line(self, last: str) -> str:
        """The line being read, ended by `last`."""
        self.keep(last)
        line, self.parts, self.size = "".join(self.parts), [], 0
        self.number += 1
        return line

    def end(self) -> Iterator[str]:
        """The last line, if the text does not end with a line end."""
        if self.parts:
            yield self.line("")


def stdin_chunks(size: int) -> Iterator[list[str]]:
    """Standard input in lists of at most `size` lines: each holds what has arrived once a first
    line has, so that a translation is written while the input is still open (an interactive
    session, a pipe fed slowly). A thread reads ahead at most `size` lines: memory stays bounded
    however long the input."""
    import queue
    import threading

    from annotated_transformer.decoding.workers import waking_get  # (a Ctrl-C gets through)

    lines: queue.Queue = queue.Queue(maxsize=size)

    def read() -> None:
        try:
            for line in _stdin_lines():
                lines.put(line)
            lines.put(_END_OF_INPUT)
        except (OSError, ValueError) as error:  # raised again in the translating thread
            lines.put(error)

    threading.Thread(target=read, name="stdin", daemon=True).start()
    while True:
        chunk, item = [], waking_get(lines)  # wait for a first line
        while True:
            if item is _END_OF_INPUT or isinstance(item, Exception):
                if chunk:
                    yield chunk
                if item is _END_OF_INPUT:
                    return
                raise item
            chunk.append(item)
            if len(chunk) == size or lines.empty():
                break
            item = waking_get(lines)
        yield chunk
