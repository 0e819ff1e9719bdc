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
        check_gpu_build
    fi
}

# PyPI's torch for Linux is a CUDA build; a local CPU wheel (a pip find-links folder) can win
# over it. Say so on a machine with a GPU instead of training on the CPU without a word.
check_gpu_build() {
    command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || return 0
    if ! .venv/bin/python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
        echo "[run.sh] warning: this machine has an NVIDIA GPU but the installed torch cannot use it" >&2
        echo "[run.sh]   (torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')): install the CUDA build of" >&2
        echo "[run.sh]   torch 2.13.0 into .venv (pytorch.org lists the pip command for your CUDA version)" >&2
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
