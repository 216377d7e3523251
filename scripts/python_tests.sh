#!/usr/bin/env bash
# Installs the `tessera` Python package with the README's pip command into a virtual
# environment over Debian's python3-torch, then runs the Python suite (tests/python).
# Usage: scripts/python_tests.sh [build-dir]   (the environment is <build-dir>/pyenv)
set -euo pipefail
cd "$(dirname "$0")/.."
ENV=$(realpath -m "${1:-build}/pyenv")
PY=/usr/bin/python3  # Debian's, which holds python3-torch (not a pyenv or conda python3 on PATH)
[ -x "$ENV/bin/python" ] || "$PY" -m venv --system-site-packages "$ENV"
# ccache's compiler names keep rebuilds of the op cheap
[ -d /usr/lib/ccache ] && export CXX=/usr/lib/ccache/g++ CC=/usr/lib/ccache/gcc
"$ENV/bin/python" -m pip install -q --no-build-isolation --no-index .
# The op's CPU kernels keep their instruction sets to themselves, as in the CMake build.
tests/attention/isa_isolation_test.sh "$("$ENV/bin/python" -c 'import glob, os, tessera; print(glob.glob(os.path.join(os.path.dirname(tessera.__file__), "_C*.so"))[0])')"
"$ENV/bin/python" -m pytest -q -p no:cacheprovider tests/python
