#!/usr/bin/env bash
# README command (2): set up, then run every test: unit tests, every chapter under nbval, the
# export check, notebook hygiene, ruff, (where Chromium exists, always under CI=true) the book built
# and opened in a headless browser, and the package on Python 3.12 and 3.13. tools/run_tests.py
# runs them on both cores. With arguments, one pytest run instead, which they go to.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
if [ $# -gt 0 ]; then
  exec .venv/bin/python -m pytest "$@"
fi
exec .venv/bin/python tools/run_tests.py
