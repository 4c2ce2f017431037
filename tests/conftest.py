"""Fixtures shared by the test files."""

from pathlib import Path

import pooch  # noqa: F401  (imported here, pooch binds its log handler to the session's stderr,
import pytest  # not to the capture of whichever test first downloads, closed after that test)

from annotated_transformer.data import multi30k

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """A local Multi30k: `$ANNOTATED_TRANSFORMER_MULTI30K` or ../shared/data/multi30k, else skip."""
    folder = multi30k.local_dir() or (SHARED if SHARED.is_dir() else None)
    if folder is None:
        pytest.skip(f"no local Multi30k: set {multi30k.DATA_DIR_ENV} or place it at {SHARED}")
    return Path(folder)
