"""nbval executes the chapters; keep what they computed so the book build does not run them again.

See tools/executed_chapters.py. This file only applies to the chapters' cells (items under book/).
"""

import executed_chapters
import pytest

# nbval waits 5 s for each message a cell's kernel publishes once the cell has finished; on a
# machine busy with other work a message can take longer, and the chapter then failed although
# its cell had passed. The cell's own limit stays --nbval-cell-timeout (pyproject.toml).
OUTPUT_TIMEOUT = 120


def pytest_collection_modifyitems(items):
    for item in items:
        if hasattr(item, "output_timeout"):  # an nbval cell
            item.output_timeout = OUTPUT_TIMEOUT


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if hasattr(item, "test_outputs"):  # an nbval cell
        executed_chapters.keep_outputs(item.config, item, outcome.get_result())
