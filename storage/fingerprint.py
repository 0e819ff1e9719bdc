"""Fingerprints: one short hash of everything that determines a stage's output."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

# A dataclass field added after outputs were made carries `metadata={HASHED_WHEN_SET: True}`: it is left out of
# the canonical form while it holds its default, so every output made before the field existed keeps its
# fingerprint (and its folder); set to anything else, it is part of it.
HASHED_WHEN_SET = "hashed_when_set"


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace; dataclasses and paths become plain values (a `HASHED_WHEN_SET`
    field at its default is left out)."""
    return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _plain(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not (f.metadata.get(HASHED_WHEN_SET) and getattr(value, f.name) == f.default)
        }
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def fingerprint(stage: str, code_version: str, config: Any, upstream: list[str] | tuple[str, ...] = ()) -> str:
    """hash(stage + code version + config + upstream fingerprints), 16 hex characters.

    Stable across processes, machines and Python versions: it hashes canonical JSON, never
    `hash()` or pickles.
    """
    payload = canonical_json({"stage": stage, "code": code_version, "config": config, "upstream": list(upstream)})
    return hashlib.blake2b(payload.encode("utf-8"), digest_size=8).hexdigest()


def fingerprints(stage: str, code_version: str, config: Any, upstreams: list[list[str]]) -> list[str]:
    """`fingerprint(stage, code_version, config, u)` for every `u` of `upstreams`, the config made canonical
    once (a folder's file units share one config, and a night fingerprints every unit). The payload is
    spliced from canonical pieces: sorted keys (code, config, stage, upstream), no whitespace, as
    `canonical_json` writes the whole."""
    head = (
        '{"code":' + canonical_json(code_version) + ',"config":' + canonical_json(config)
        + ',"stage":' + canonical_json(stage) + ',"upstream":'
    )  # fmt: skip
    return [
        hashlib.blake2b((head + canonical_json(list(u)) + "}").encode("utf-8"), digest_size=8).hexdigest()
        for u in upstreams
    ]


def file_signature(path: str | os.PathLike) -> list[list[Any]]:
    """(relative path, size, mtime in ns) for a file or every file under a folder, sorted.

    Cheap enough for multi-GB dumps (no content read), like `make`; a touched or edited
    input gives a new signature and so a new ingest fingerprint.
    """
    out = []
    for rel, f in _files(path):
        st = f.stat()
        out.append([rel, st.st_size, st.st_mtime_ns])
    return out


def content_signature(path: str | os.PathLike) -> list[list[Any]]:
    """(relative path, size, xxh3-128 of the bytes) for a file or every file under a folder.

    For evaluation sets: small next to the work they key, and a copied or touched file with
    the same bytes must still be a cache hit (an edited one never is).
    """
    import xxhash

    out = []
    for rel, f in _files(path):
        digest = xxhash.xxh3_128()
        with open(f, "rb") as stream:
            while chunk := stream.read(1 << 22):
                digest.update(chunk)
        out.append([rel, f.stat().st_size, digest.hexdigest()])
    return out


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 hex digest of one file's bytes: the STS units' data key (their files are small, and the same
    data under another path is the same unit). One string, where `content_signature` lists a folder's files."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _files(path: str | os.PathLike) -> list[tuple[str, Path]]:
    """(relative name, path) of a file, or of every file under a folder, sorted."""
    base = Path(path)
    if not base.exists():
        raise FileNotFoundError(f"input not found: {base}")
    files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
    return [(f.name if f == base else str(f.relative_to(base)), f) for f in files]
