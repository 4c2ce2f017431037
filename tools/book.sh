#!/usr/bin/env bash
# README command (1): set up, execute every chapter, build the HTML book, say where to open it.
# Any failing cell or Sphinx warning fails the build. Extra arguments go to jupyter-book.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/setup.sh
.venv/bin/jupyter-book build . --all -W -n --keep-going "$@"
echo
echo "The book is built. Open it in a browser (it needs no network):"
echo "  file://$PWD/_build/html/index.html"
