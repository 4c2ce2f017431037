"""Fixtures shared by the test files."""

import os
from pathlib import Path

import pooch  # noqa: F401  (imported here, pooch binds its log handler to the session's stderr,
import pytest  # not to the capture of whichever test first downloads, closed after that test)

from annotated_transformer.data import multi30k
from annotated_transformer.decoding.kernels import KERNELS_ENV

# Every test decodes with PyTorch's attention and never reads or writes the user's kernels; the
# tests of the compiled kernels (test_kernels.py) point this at a folder of their own.
os.environ[KERNELS_ENV] = "off"

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """A local Multi30k: `$ANNOTATED_TRANSFORMER_MULTI30K` or ../shared/data/multi30k, else skip."""
    folder = multi30k.local_dir() or (SHARED if SHARED.is_dir() else None)
    if folder is None:
        pytest.skip(f"no local Multi30k: set {multi30k.DATA_DIR_ENV} or place it at {SHARED}")
    return Path(folder)
