"""What every command of `annotated-transformer` shares: its name, the values `--help` names
without importing torch (the presets, the limits, the language pairs), `UsageError` (exit status
2), the checks of an output file or folder made before any work, `--device cuda`'s check, the
optional packages a command needs, and the flush of standard output.

Hand-written; the chapter "How the package is built: files, downloads and records" teaches the
output checks, "Engineering a training run" the commands as a whole.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from annotated_transformer.runs.presets import (  # (imports no torch: `--help` stays quick)
    LANGUAGE_NAMES as LANGUAGE_NAMES,
)
from annotated_transformer.runs.presets import MAX_ALPHA as MAX_ALPHA
from annotated_transformer.runs.presets import MAX_TOKENS as MAX_TOKENS
from annotated_transformer.runs.presets import PAIRS as PAIRS
from annotated_transformer.runs.presets import PRESETS
from annotated_transformer.util.cores import usable_cores
from annotated_transformer.util.errors import UsageError as UsageError  # (exit status 2)
from annotated_transformer.util.settings import LARGEST_INT as LARGEST_INT

PROG = "annotated-transformer"
PRESET_NAMES = tuple(PRESETS)  # the presets `--preset` names
PRESET_LIST = ", ".join(PRESET_NAMES[:-1]) + " or " + PRESET_NAMES[-1]


# --- checks made before any work ---------------------------------------------------------------


def _probe(folder: Path, option: str, path: Path) -> None:
    """A file can be created in `folder` (tried: a temporary file), or an OSError naming it."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise OSError(
            f"{option} {path}: cannot write in {folder} ({error.strerror or error})"
        ) from None


def _check_outside_package(path: Path, option: str) -> None:
    """Refuse an output inside the installed package: only save-pretrained and the exports write
    there, told by --into-package (`util.atomic.check_outside_package`)."""
    from annotated_transformer.util.atomic import package_holding

    package = package_holding(path)
    if package is not None:
        raise OSError(
            f"{option} {path}: inside the installed package ({package}), which no command "
            f"writes into but the release recipe: choose a place outside it"
        )


def check_output_file(
    path: str | os.PathLike[str], option: str, ours: Callable[[Path], bool], kind: str
) -> Path:
    """Refuse an output file inside the installed package, whose folder is missing or cannot be
    written, or that `check_replaceable_file` refuses to replace."""
    path = Path(path)
    _check_outside_package(path, option)
    folder = path.parent
    if not folder.is_dir():
        state = "is not a folder" if folder.exists() else "does not exist"
        raise OSError(f"{option} {path}: the folder {folder} {state}")
    _probe(folder, option, path)
    check_replaceable_file(path, option, ours, kind)
    return path


def check_replaceable_file(
    path: Path, option: str, ours: Callable[[Path], bool], kind: str,
    instead: str = "choose another name",
) -> None:  # fmt: skip
    """The one check made before a command replaces a file: a `path` that exists is replaced only
    if it is a regular file that `ours` tells is `kind` written by this tool. A folder, a device, a
    pipe or a socket is refused before anything reads it (reading a pipe may never end); `instead`
    ends the message with what the user can do."""
    if path.is_dir():
        raise OSError(f"{option} {path}: a folder, not a file")
    if path.exists() and not path.is_file():  # (read to tell whether it is ours, it may not end)
        raise OSError(f"{option} {path}: not a regular file (a device, a pipe or a socket), so "
                      f"nothing is written there: {instead}")  # fmt: skip
    if path.exists() and not ours(path):
        raise OSError(
            f"{option} {path}: the file exists and is not {kind} written by {PROG}, so it is "
            f"not replaced: move it away or {instead}"
        )


def check_output_folder(
    path: str | os.PathLike[str], option: str, into_package: bool = False
) -> Path:
    """Refuse an output folder that is a file, or that cannot be created or written in, or that
    is inside the installed package unless `into_package` (checked by the caller)."""
    path = Path(path)
    if not into_package:
        _check_outside_package(path, option)
    existing = next(p for p in (path, *path.parents) if p.exists() or p == Path(p.anchor))
    if not existing.is_dir():
        raise OSError(f"{option} {path}: {existing} is a file, not a folder")
    _probe(existing, option, path)
    return path


def thread_count(text: str) -> int:
    """An argparse type for `--threads`: a positive integer, at most the cores this process may
    run on (more would only wait for them, and under a memory cap creating them fails)."""
    try:
        threads = int(text)
    except ValueError:  # (not an integer, or one of more than 4,300 digits)
        threads = 0
    cores = usable_cores()
    if threads < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if threads > cores:
        raise argparse.ArgumentTypeError(f"expected at most {cores}, the cores this process "
                                         f"may run on (more would only wait for them), got "
                                         f"{text!r}")  # fmt: skip
    return threads


def check_device(device: str | None) -> None:
    """`--device cuda` only where PyTorch sees a CUDA GPU."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            why = "it was built without CUDA" if torch.version.cuda is None else "no GPU found"
            raise OSError(
                f"--device cuda: PyTorch {torch.__version__} sees no CUDA GPU ({why}); "
                f"use --device cpu"
            )


def needs_packages(command: str, packages: Sequence[str], extra: str) -> None:
    """An OSError naming the packages `command` needs that are not installed, and the extra."""
    missing = [name for name in packages if not importlib.util.find_spec(name)]
    if missing:
        package = "the packages" if len(missing) > 1 else "the package"
        raise OSError(f"{command} needs {package} {', '.join(missing)}: "
                      f"pip install 'annotated-transformer[{extra}]'")  # fmt: skip


class StdoutError(OSError):
    """Standard output could not be written (a full disk): what was printed is lost."""


class GuardedStdout:
    """Standard output whose writes fail as a `StdoutError` that names it ("cannot write standard
    output: No space left on device"), not as a bare "[Errno 28]"; a reader that went away stays
    a BrokenPipeError. Everything else is the stream's own."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return self._guarded(self.stream.write, text)

    def flush(self) -> None:
        self._guarded(self.stream.flush)

    def _guarded(self, call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as error:
            raise StdoutError(f"cannot write standard output: {error.strerror or error}") from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def flush_stdout() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        raise StdoutError(f"cannot write standard output: {error.strerror or error}") from None
