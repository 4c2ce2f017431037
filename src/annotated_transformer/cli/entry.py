"""Running a command, in one place: `main` (the console script `annotated-transformer` and
`python -m annotated_transformer`) parses, checks the paths typed and standard output before any
work, runs the command and turns whatever it raises into ONE line, `annotated-transformer: error:
...`, with an exit status that says whose mistake it is; running out of memory is worded here,
naming the option to lower.

Hand-written; the chapters "Engineering a training run" and "How the package is built: files,
downloads and records" teach the statuses and the one-line errors.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

from annotated_transformer.cli.common import PROG, StdoutError, UsageError, _flush_stdout
from annotated_transformer.cli.parser import build_parser


def _one_line(error: BaseException) -> str:
    """An error as one line: an OSError of the system as "FILE: REASON", else its message."""
    if isinstance(error, OSError) and error.filename and error.strerror:
        text = f"{error.filename}: {error.strerror}"
    else:
        text = str(error) or type(error).__name__
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _fail(error: BaseException, status: int) -> int:
    print(f"{PROG}: error: {_one_line(error)}", file=sys.stderr)
    return status


OUTPUTS = ("out", "output", "results", "runs", "data_dir", "checkpoint")  # paths typed
WRITTEN = ("out", "output", "results", "runs")  # the paths written to


def _check_not_a_broken_link(path: Path, option: str) -> None:
    """An output that is a symbolic link to nothing (or a loop of links) would be replaced by a
    regular file: refused, naming the link."""
    if not path.is_symlink():
        return
    try:
        path.resolve(strict=True)
    except FileNotFoundError:
        raise OSError(
            f"{option} {path}: a symbolic link to {os.readlink(path)}, which does not "
            f"exist: not replaced; remove the link or give its target"
        ) from None
    except (OSError, RuntimeError):  # RuntimeError: Python 3.11's word for a loop
        raise OSError(
            f"{option} {path}: a loop of symbolic links ({path} -> "
            f"{os.readlink(path)}): not replaced; remove the link"
        ) from None


def _check_paths_and_stdout(args: argparse.Namespace) -> None:
    """Before any work: no path option given empty, and (for every command that prints its
    results, all but train) a standard output that is open and not /dev/full or a full disk."""
    _check_text_is_utf8(args)
    for name in OUTPUTS:
        value = getattr(args, name, None)
        option = "--" + name.replace("_", "-")
        if isinstance(value, str) and not value.strip():
            raise UsageError(f"{option} {value!r}: an empty path; give a file or folder name")
        if isinstance(value, str) and name in WRITTEN:
            _check_not_a_broken_link(Path(value), option)
    if args.command == "train":  # (it logs on standard error)
        return
    if sys.stdout is None:
        raise OSError("standard output is closed: what the command prints would be lost")
    try:
        mode, full = os.fstat(sys.stdout.fileno()), None
        if stat.S_ISCHR(mode.st_mode) and os.path.exists("/dev/full"):
            full = mode.st_rdev == os.stat("/dev/full").st_rdev
        elif stat.S_ISREG(mode.st_mode):
            full = os.fstatvfs(sys.stdout.fileno()).f_bavail == 0
    except (OSError, ValueError, io.UnsupportedOperation):  # (not a file: a test's capture)
        return
    if full:
        raise OSError("standard output: No space left on device (it is /dev/full or on a full "
                      "disk): what the command prints would be lost")  # fmt: skip


# PyTorch's wordings: "CUDA out of memory", "MPS backend out of memory", "DefaultCPUAllocator:
# can't allocate memory: ... Error code 12 (Cannot allocate memory)" (Linux), "not enough
# memory" (Windows), "std::bad_alloc"
OUT_OF_MEMORY = ("out of memory", "not enough memory", "can't allocate memory",
                 "cannot allocate memory", "bad_alloc")  # fmt: skip


def _out_of_memory(args: argparse.Namespace, error: BaseException) -> str | None:
    """One line for running out of memory, naming the option to lower; None for another error."""
    text = str(error)
    if not (isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError"
            or any(words in text.lower() for words in OUT_OF_MEMORY)):  # fmt: skip
        return None
    where = "GPU" if any(name in text for name in ("CUDA", "cuda", "MPS", "HIP")) else "memory"
    if args.command == "train":
        lower = ("lower --max-tokens (or --set max_tokens=N; raise --accumulate to keep the "
                 "batch), then --resume")  # fmt: skip
    elif hasattr(args, "beam"):
        lower = f"lower --max-tokens (now {args.max_tokens}) or --beam (now {args.beam})"
    else:
        lower = "close other programs, or run it on a machine with more memory"
    found = re.search(r"tried to allocate (\d+) bytes|tried to allocate ([\d.]+ [KMGT]iB)",
                      text, re.IGNORECASE)  # fmt: skip
    asked = "" if found is None else "; {} asked for at once".format(
        f"{int(found[1]) / 2**30:,.1f} GiB" if found[1] else found[2]
    )  # fmt: skip
    return f"out of {where} while running {args.command}: {lower}{asked}"


def _check_text_is_utf8(args: argparse.Namespace) -> None:
    """The sentences typed as arguments are UTF-8 text: Python keeps a byte that is not (typed
    in a terminal of another encoding) as a lone surrogate, which no tokenizer reads."""
    text = getattr(args, "text", None)
    for number, sentence in enumerate([text] if isinstance(text, str) else text or [], 1):
        try:
            sentence.encode("utf-8")
        except UnicodeEncodeError as error:
            byte = ord(sentence[error.start]) - 0xDC00  # (surrogateescape keeps byte b as U+DCbb)
            shown = f"byte 0x{byte:02x}" if 0x80 <= byte <= 0xFF else "a lone surrogate"
            raise ValueError(f"argument {number} is not UTF-8 text ({shown} at character "
                             f"{error.start + 1}): set the terminal to UTF-8, or give the "
                             f"sentences as UTF-8 on standard input") from None  # fmt: skip


def _drop_stdout() -> None:
    """Point standard output at /dev/null, so that the exit's flush fails no more."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # (standard output is not a file)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # (argparse exits: 0 after --help or --version, 2 on a mistake)
    if not getattr(args, "run", None):
        parser.print_usage(sys.stderr)
        commands = ("info, download, train, prepare, translate, evaluate, attention, average, "
                    "save-pretrained, export-onnx, export-ct2, export-hf")  # fmt: skip
        return _fail(UsageError(f"give a command: {commands} or grid (--help for each)"), 2)
    try:
        _check_paths_and_stdout(args)
        status = args.run(args)
        if sys.stdout is not None:
            _flush_stdout()
        return status
    except UsageError as error:  # what was typed
        return _fail(error, 2)
    except BrokenPipeError:  # the reader of standard output went away (`| head`): stop quietly
        _drop_stdout()
        return 1
    except StdoutError as error:  # standard output filled up
        _drop_stdout()
        return _fail(error, 1)
    except (OSError, ValueError) as error:  # the files or the machine
        return _fail(error, 1)
    except (RuntimeError, MemoryError) as error:  # from PyTorch: only out of memory is ours
        message = _out_of_memory(args, error)
        if message is None:
            raise
        return _fail(RuntimeError(message), 1)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
