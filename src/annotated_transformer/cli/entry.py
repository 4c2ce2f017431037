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
import stat
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from annotated_transformer.cli.common import (
    PROG,
    GuardedStdout,
    StdoutError,
    UsageError,
    flush_stdout,
)
from annotated_transformer.cli.parser import build_parser
from annotated_transformer.util.errors import Error, InputError


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
TO_STANDARD_OUTPUT = {("attention", "output")}  # where `-` names standard output, as is usual


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
    check_text_is_utf8(args)
    if getattr(args, "keep_greedy", False) and getattr(args, "search", None) == "t2t":
        from annotated_transformer.decoding.decoding_checks import check_search

        check_search(args.search, args.keep_greedy)  # (options that do not go together: exit 2)
    for name in OUTPUTS:
        value = getattr(args, name, None)
        option = "--" + name.replace("_", "-")
        if isinstance(value, str) and not value.strip():
            raise UsageError(f"{option} {value!r}: an empty path; give a file or folder name")
        written = name in WRITTEN or (args.command, name) == ("download", "data_dir")
        if value == "-" and written and (args.command, name) not in TO_STANDARD_OUTPUT:
            raise UsageError(f"{option} -: {args.command} writes a file or folder here, not to "
                             f"standard output: give its name (./- for one named -)")  # fmt: skip
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


def out_of_memory(args: argparse.Namespace, error: BaseException) -> str | None:
    """One line for running out of memory, naming the option to lower; None for another error.

    Known by type: Python's `MemoryError` and PyTorch's `torch.OutOfMemoryError` (CUDA, MPS).
    PyTorch's CPU allocator raises a plain RuntimeError instead, the one error known here by the
    allocator's name in it ("DefaultCPUAllocator", or "std::bad_alloc" from C++)."""
    torch = sys.modules.get("torch")  # (not imported: no PyTorch error can have happened)
    by_type = isinstance(error, MemoryError) or (
        torch is not None and isinstance(error, torch.OutOfMemoryError)
    )
    text = str(error)
    cpu = type(error) is RuntimeError and ("DefaultCPUAllocator" in text or "bad_alloc" in text)
    if not (by_type or cpu):
        return None
    where = "GPU" if torch is not None and isinstance(error, torch.OutOfMemoryError) else "memory"
    if args.command == "train":
        lower = ("lower --max-tokens (or --set max_tokens=N; raise --accumulate to keep the "
                 "batch), then --resume")  # fmt: skip
    elif hasattr(args, "beam"):
        lower = f"lower --max-tokens (now {args.max_tokens}) or --beam (now {args.beam})"
    else:
        lower = "close other programs, or run it on a machine with more memory"
    return f"out of {where} while running {args.command}: {lower}{_asked(text)}"


def _asked(text: str) -> str:
    """ "; N GiB asked for at once", from what PyTorch's message says it tried to allocate (in
    bytes from the CPU's allocator, "20.00 GiB" from CUDA's); "" if it says nothing."""
    _, found, rest = text.partition("tried to allocate ")
    if not found:
        _, found, rest = text.partition("Tried to allocate ")
    amount, unit = ([*rest.rstrip(".").split(), "", ""])[:2]
    if amount.isdigit():
        return f"; {int(amount) / 2**30:,.1f} GiB asked for at once"
    if unit.rstrip(".") in ("KiB", "MiB", "GiB", "TiB") and amount.replace(".", "", 1).isdigit():
        return f"; {amount} {unit.rstrip('.')} asked for at once"
    return ""


def check_text_is_utf8(args: argparse.Namespace) -> None:
    """The sentences typed as arguments are UTF-8 text: Python keeps a byte that is not (typed
    in a terminal of another encoding) as a lone surrogate, which no tokenizer reads."""
    text = getattr(args, "text", None)
    for number, sentence in enumerate([text] if isinstance(text, str) else text or [], 1):
        try:
            sentence.encode("utf-8")
        except UnicodeEncodeError as error:
            byte = ord(sentence[error.start]) - 0xDC00  # (surrogateescape keeps byte b as U+DCbb)
            shown = f"byte 0x{byte:02x}" if 0x80 <= byte <= 0xFF else "a lone surrogate"
            raise InputError(f"argument {number} is not UTF-8 text ({shown} at character "
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
        commands = ("info, download, train, prepare, translate, kernels, evaluate, attention, "
                    "average, save-pretrained, export-onnx, export-ct2, export-hf")  # fmt: skip
        return _fail(UsageError(f"give a command: {commands} or grid (--help for each)"), 2)
    stdout = sys.stdout
    sys.stdout = GuardedStdout(stdout) if stdout is not None else None
    try:
        return _run(args)
    finally:
        sys.stdout = stdout


def _run(args: argparse.Namespace) -> int:
    """Run the command: its one-line errors and their exit statuses, or a bug's traceback."""
    if os.environ.get("ANNOTATED_TRANSFORMER_DEBUG") == "1":  # every error with its traceback
        _check_paths_and_stdout(args)
        return args.run(args)
    try:
        _check_paths_and_stdout(args)
        status = args.run(args)
        if sys.stdout is not None:
            flush_stdout()
        return status
    except UsageError as error:  # what was typed
        return _fail(error, 2)
    except BrokenPipeError:  # the reader of standard output went away (`| head`): stop quietly
        _drop_stdout()
        return 1
    except StdoutError as error:  # standard output filled up
        _drop_stdout()
        return _fail(error, 1)
    except (Error, OSError) as error:  # the files, the data or the machine
        return _fail(error, 1)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # out of memory, or a bug of the package
        message = out_of_memory(args, error)
        if message is not None:
            return _fail(RuntimeError(message), 1)
        traceback.print_exc()
        return _fail(RuntimeError(f"{type(error).__name__} above is a bug of {PROG}: please "
                                  f"report it with the traceback and what `{PROG} info` "
                                  f"prints"), 1)  # fmt: skip
