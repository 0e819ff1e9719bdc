"""Ingest + split throughput and peak memory on the demo corpus and generated corpora.

    .venv/bin/python benchmarks/ingest_split.py                 # demo + 50 MB + 200 MB
    .venv/bin/python benchmarks/ingest_split.py --sizes-mb 20   # quicker

Prints documents/s and MB/s (of input bytes) for ingest, split and both, and the peak
resident memory of the main process and of the split workers. Peak memory that stays flat
while the corpus grows 4x is what "independent of corpus size" means here.
"""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import harness

from storage.shards import finished_shards
from tasks.ingest.documents import IngestConfig, ingest_corpus
from tasks.ingest.readers import ReaderConfig, default_corpus
from tasks.split.sentences import SplitConfig, split_all

EN_WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but have an they "
    "you were her she there one all we their been has when who will more no if out so said what up its about into "
    "than them can only other new some could time these two may then do first any my now such like our over man me "
    "model data graph network learning training sentence encoder retrieval question paper results method Dr. U.S."
).split()
ZH_CHARS = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严"  # noqa: E501


def english_doc(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(10, 60)):
        words = rng.choices(EN_WORDS, k=rng.randint(6, 30))
        sentences.append(" ".join(words).capitalize() + rng.choice([".", ".", ".", "?", "!"]))
    paragraphs = [" ".join(sentences[i : i + 6]) for i in range(0, len(sentences), 6)]
    return "\n".join(paragraphs)


def chinese_doc(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(10, 60)):
        body = "".join(rng.choices(ZH_CHARS, k=rng.randint(8, 40)))
        sentences.append(body + rng.choice("。。。！？；") + ("”" if rng.random() < 0.05 else ""))
    return "".join(sentences)


def generate(path: Path, size_mb: float, seed: int = 0) -> int:
    """A JSONL corpus of about `size_mb` MB, half English and half Chinese documents."""
    rng = random.Random(seed)
    target = int(size_mb * 1e6)
    written = n = 0
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            text = english_doc(rng) if n % 2 == 0 else chinese_doc(rng)
            line = json.dumps({"id": n, "title": f"Document {n}", "text": text}, ensure_ascii=False) + "\n"
            f.write(line)
            written += len(line.encode("utf-8"))
            n += 1
    return n


def peak_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def measure(label: str, path: Path, workers: int, show=print) -> dict:
    size_mb = path.stat().st_size / 1e6
    with tempfile.TemporaryDirectory(prefix="gur-bench-") as tmp:
        out = Path(tmp)
        t0 = time.perf_counter()
        totals = ingest_corpus(path, IngestConfig(ReaderConfig(), "bench", docs_per_shard=2000), out / "ingest")
        t1 = time.perf_counter()
        split_all(finished_shards(out / "ingest"), out / "split", SplitConfig(), workers=workers)
        t2 = time.perf_counter()
    docs = totals["documents"]
    row = {
        "corpus": label,
        "input_MB": round(size_mb, 1),
        "docs": docs,
        "ingest_MB/s": round(size_mb / (t1 - t0), 1),
        "split_MB/s": round(size_mb / (t2 - t1), 1),
        "total_s": round(t2 - t0, 2),
        "docs/s": round(docs / (t2 - t0)),
        "MB/s": round(size_mb / (t2 - t0), 1),
        "peak_main_MB": round(peak_mb(resource.RUSAGE_SELF)),
        "peak_worker_MB": round(peak_mb(resource.RUSAGE_CHILDREN)),
    }
    show(json.dumps(row))
    return row


def main() -> None:
    parser = harness.parser(__doc__, workdir_help="keeps the generated corpora (without it each is deleted once read)")
    parser.add_argument("--sizes-mb", type=float, nargs="*", default=[50, 200], help="generated corpus sizes")
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="split processes (default: all cores)")
    args = parser.parse_args()
    show = harness.Lines()
    show(f"cores={os.cpu_count()} workers={args.workers} python={sys.version.split()[0]}")
    # The bz2 dump is measured on its decompressed XML size, which is what the reader parses.
    demo = default_corpus()
    import bz2

    with bz2.open(demo) as f:
        xml_mb = sum(len(chunk) for chunk in iter(lambda: f.read(1 << 20), b"")) / 1e6
    rows = [measure("demo (wikipedia sample, bz2)", demo, args.workers, show)]
    show(f"  demo decompressed XML: {xml_mb:.1f} MB -> {xml_mb / rows[0]['total_s']:.1f} MB/s of XML")
    folder = harness.workdir(args)
    for size in args.sizes_mb:
        path = folder / f"generated-{size:g}MB.jsonl"
        if not path.exists():
            generate(path, size)
        rows.append(measure(f"generated {size:g} MB (en+zh)", path, args.workers, show))
        if not args.workdir:
            path.unlink()
    sizes = ", ".join(f"{size:g} MB" for size in args.sizes_mb)
    harness.record(args, f"Ingest and split on the demo corpus and {sizes} generated", show.lines, {"rows": rows})


if __name__ == "__main__":
    main()
