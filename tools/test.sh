#!/usr/bin/env bash
# README command (2): set up, then run every test in one pytest run: unit tests, every chapter
# under nbval, the export check, notebook hygiene, ruff, and (where Chromium exists, always under
# CI=true) the book built and opened in a headless browser. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
.venv/bin/python -m pytest "$@"
