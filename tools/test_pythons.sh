#!/usr/bin/env bash
# The package on the other Pythons it supports: build the wheel once, then for each of Python 3.12
# and 3.13 make a fresh venv in _build/pythons/, install torch==2.13.0 and the wheel with its
# `serve` extra as a user does (`pip install ".[serve]"`, as .github/workflows/tests.yml), and run
# the tests marked `package` there (tests/test_package_smoke.py); a venv that passed is removed
# (about 5 GB each). tools/test.sh runs this beside the main suite: most of it is waiting on
# downloads, which pip's cache makes fast the next time.
#
#     bash tools/test_pythons.sh [3.12 3.13]
#
# An interpreter is found as ~/.pyenv/versions/3.1x*/bin/python3.1x, else python3.1x on PATH; one
# this machine lacks is said in one line and skipped. The exit status is 1 if any version failed.
set -uo pipefail
cd "$(dirname "$0")/.."
VERSIONS=("$@")
[ ${#VERSIONS[@]} -gt 0 ] || VERSIONS=(3.12 3.13)
OUT=_build/pythons
rm -rf "$OUT/wheel"
mkdir -p "$OUT"

find_python() {  # the interpreter of version $1, or nothing
  local version=$1 candidate
  for candidate in "$HOME"/.pyenv/versions/"$version"*/bin/python"$version"; do
    [ -x "$candidate" ] && { echo "$candidate"; return; }
  done
  command -v "python$version" 2>/dev/null || true
}

echo "pythons: building the wheel"
# from a copy, so that the build leaves nothing in the checkout for the suite's own builds to meet
rm -rf "$OUT/project" && mkdir -p "$OUT/project"
cp -r src pyproject.toml README.md LICENSE "$OUT/project/"
find "$OUT/project" \( -name __pycache__ -o -name "*.egg-info" \) -prune -exec rm -rf {} +
if ! .venv/bin/python -m pip wheel --quiet --no-deps --no-build-isolation -w "$OUT/wheel" \
    "$OUT/project" >"$OUT/wheel.log" 2>&1; then
  echo "pythons: FAILED to build the wheel ($OUT/wheel.log):"; tail -20 "$OUT/wheel.log"; exit 1
fi
WHEEL=$(ls "$OUT"/wheel/annotated_transformer-*.whl)
status=0
for version in "${VERSIONS[@]}"; do
  python=$(find_python "$version")
  if [ -z "$python" ]; then
    echo "pythons: Python $version is not on this machine (no ~/.pyenv/versions/$version*, no python$version): skipped"
    continue
  fi
  venv="$OUT/$version"
  rm -rf "$venv"
  started=$SECONDS
  if ! "$python" -m venv "$venv" >"$OUT/$version.log" 2>&1 \
     || ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile \
          torch==2.13.0 "$WHEEL[serve]" pytest >>"$OUT/$version.log" 2>&1; then
    echo "pythons: Python $version: FAILED to install torch and the wheel ($OUT/$version.log):"
    grep -v "^WARNING: Location" "$OUT/$version.log" | tail -20
    status=1
    continue
  fi
  installed=$((SECONDS - started))
  # As the workflow runs them: only the package's tests, with none of the suite's options.
  if "$venv/bin/python" -m pytest -p no:cacheprovider -o addopts="" -q -m package \
      tests/test_package_smoke.py >>"$OUT/$version.log" 2>&1; then
    echo "pythons: Python $version ($("$venv/bin/python" --version 2>&1)): $(tail -1 "$OUT/$version.log" | tr -d '=')" \
         "(installed in ${installed} s, tested in $((SECONDS - started - installed)) s)"
    rm -rf "$venv"  # about 5 GB with PyPI's torch; a failing one stays for a look
  else
    echo "pythons: Python $version: the package tests FAILED ($OUT/$version.log):"
    tail -30 "$OUT/$version.log"
    status=1
  fi
done
exit $status
