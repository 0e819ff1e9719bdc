#!/usr/bin/env bash
# One entry point for people and CI:
#   ./run.sh demo   create .venv if needed, then build pairs from the bundled Wikipedia sample
#   ./run.sh test   create .venv if needed, then run the test suite
#   ./run.sh setup  only create/refresh .venv
set -euo pipefail
cd "$(dirname "$0")"
export DO_NOT_TRACK=1
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || PY=python3

setup() {
    local stamp=.venv/.installed
    if [[ ! -f "$stamp" || pyproject.toml -nt "$stamp" ]]; then
        echo "[run.sh] installing into .venv (first time takes a few minutes)"
        [[ -x .venv/bin/python ]] || "$PY" -m venv .venv
        .venv/bin/python -m pip install --quiet --upgrade pip
        .venv/bin/python -m pip install --quiet -e ".[test,cli]"
        touch "$stamp"
    fi
}

mode="${1:-demo}"
shift || true
case "$mode" in
    setup) setup ;;
    demo) setup; exec .venv/bin/gur demo "$@" ;;
    test) setup; exec .venv/bin/python -m pytest "$@" ;;
    *) echo "usage: ./run.sh {demo|test|setup} [args...]" >&2; exit 2 ;;
esac
