"""`translate`'s standard input: read from its file descriptor as UTF-8 whatever the locale, cut
into lines (CR, CRLF and LF), and handed over in chunks of at most `--chunk` lines by a reading
thread, so that each translation is written while the input is still open.

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

_LINE_END = re.compile(r"\r\n|\r|\n")
_END_OF_INPUT = object()  # what the reader of standard input sends after the last line
CHUNK_LINES = 500  # `translate --chunk`: lines read, translated and written at a time


def _stdin_blocks() -> Iterator[bytes | str]:
    """Standard input as it arrives: blocks of bytes read from its file descriptor, or a text
    stream's lines where it has none. Reading the descriptor takes no lock of Python's, so a
    thread blocked on it cannot stall the interpreter's exit (Ctrl-C while it waits)."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        yield from sys.stdin
        return
    while block := os.read(fd, 1 << 16):
        yield block


def _stdin_lines() -> Iterator[str]:
    """Standard input's lines as they arrive, read as UTF-8 whatever the locale; CR, CRLF and LF
    all end a line."""
    if sys.stdin is None:
        raise OSError(
            "standard input is closed: give the sentences as arguments, or one per line on "
            "standard input"
        )
    if sys.stdin.isatty():
        print(f"{PROG}: reading sentences to translate, one per line; end with Ctrl-D",
              file=sys.stderr)  # fmt: skip
    decoder, pending, number = codecs.getincrementaldecoder("utf-8")(), "", 0
    try:
        for block in itertools.chain(_stdin_blocks(), [b""]):  # b"": the end, told the decoder
            text = decoder.decode(block, final=block == b"") if isinstance(block, bytes) else block
            data = pending + text
            held = "\r" if data.endswith("\r") and block != b"" else ""  # (its \n may follow)
            *lines, pending = _LINE_END.split(data[: len(data) - len(held)])
            pending += held
            for line in lines:
                number += 1
                yield line
        if pending:
            yield pending
    except UnicodeDecodeError as error:
        before = pending + error.object[: error.start].decode("utf-8", errors="replace")
        line = number + 1 + len(_LINE_END.findall(before))
        raise ValueError(
            f"standard input is not UTF-8 text (line {line}: {error.reason})"
        ) from None
    except OSError as error:
        raise OSError(f"cannot read standard input: {error.strerror or error}") from None


def _stdin_chunks(size: int) -> Iterator[list[str]]:
    """Standard input in lists of at most `size` lines: each holds what has arrived once a first
    line has, so that a translation is written while the input is still open (an interactive
    session, a pipe fed slowly). A thread reads ahead at most `size` lines: memory stays bounded
    however long the input."""
    import queue
    import threading

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
        chunk, item = [], lines.get()  # wait for a first line
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
            item = lines.get()
        yield chunk
