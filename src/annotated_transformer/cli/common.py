"""What every command of `annotated-transformer` shares: its name, the values `--help` names
without importing torch (the presets, the limits, the language pairs), `UsageError` (exit status
2), the checks of an output file or folder made before any work, `--device cuda`'s check, the
optional packages a command needs, and the flush of standard output.

Hand-written; the chapter "How the package is built: files, downloads and records" teaches the
output checks, "Engineering a training run" the commands as a whole.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from annotated_transformer.util.errors import UsageError as UsageError  # (exit status 2)

PROG = "annotated-transformer"
# runs.presets.PRESETS, named here so that `--help` needs no torch (a test keeps them equal)
PRESET_NAMES = ("tiny", "small", "release", "base", "big", "wmt14-base", "wmt14-big")
PRESET_LIST = ", ".join(PRESET_NAMES[:-1]) + " or " + PRESET_NAMES[-1]
# decoding.simple.MAX_ALPHA and util.settings.LARGEST_INT, named here so that `--help` needs no
# torch (a test keeps them equal); the largest token budget is runs.presets' for max_tokens
MAX_ALPHA, LARGEST_INT, MAX_TOKENS = 10.0, 2**63 - 1, 1 << 20
# runs.presets' PAIRS and LANGUAGE_NAMES, named here so that `--help` needs no torch (tested)
PAIRS, LANGUAGE_NAMES = ("de-en", "en-de"), {"de": "German", "en": "English"}


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


def check_output_file(
    path: str | os.PathLike[str], option: str, ours: Callable[[Path], bool], kind: str
) -> Path:
    """Refuse an output file whose folder is missing or cannot be written, a folder, or an existing
    file that is not `kind` written by this tool (which `ours` tells), which it would replace."""
    path = Path(path)
    if path.is_dir():
        raise OSError(f"{option} {path}: a folder, not a file")
    folder = path.parent
    if not folder.is_dir():
        state = "is not a folder" if folder.exists() else "does not exist"
        raise OSError(f"{option} {path}: the folder {folder} {state}")
    _probe(folder, option, path)
    if path.exists() and not ours(path):
        raise OSError(
            f"{option} {path}: the file exists and is not {kind} written by {PROG}, so it is "
            f"not replaced: move it away or choose another name"
        )
    return path


def check_output_folder(path: str | os.PathLike[str], option: str) -> Path:
    """Refuse an output folder that is a file, or that cannot be created or written in."""
    path = Path(path)
    existing = next(p for p in (path, *path.parents) if p.exists() or p == Path(p.anchor))
    if not existing.is_dir():
        raise OSError(f"{option} {path}: {existing} is a file, not a folder")
    _probe(existing, option, path)
    return path


def _check_device(device: str | None) -> None:
    """`--device cuda` only where PyTorch sees a CUDA GPU."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            why = "it was built without CUDA" if torch.version.cuda is None else "no GPU found"
            raise OSError(
                f"--device cuda: PyTorch {torch.__version__} sees no CUDA GPU ({why}); "
                f"use --device cpu"
            )


def _needs(command: str, packages: Sequence[str], extra: str) -> None:
    """An OSError naming the packages `command` needs that are not installed, and the extra."""
    missing = [name for name in packages if not importlib.util.find_spec(name)]
    if missing:
        package = "the packages" if len(missing) > 1 else "the package"
        raise OSError(f"{command} needs {package} {', '.join(missing)}: "
                      f"pip install 'annotated-transformer[{extra}]'")  # fmt: skip


class StdoutError(OSError):
    """Standard output could not be written (a full disk): what was printed is lost."""


def _flush_stdout() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        raise StdoutError(f"cannot write standard output: {error.strerror or error}") from None
