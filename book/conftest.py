"""nbval executes the chapters; keep what they computed so the book build does not run them again.

See tools/executed_chapters.py. This file only applies to the chapters' cells (items under book/).
"""

import executed_chapters
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if hasattr(item, "test_outputs"):  # an nbval cell
        executed_chapters.keep_outputs(item.config, item, outcome.get_result())
