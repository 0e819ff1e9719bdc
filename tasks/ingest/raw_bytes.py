"""A corpus file's bytes: its compression from its first bytes (gzip, bz2, zstd), opened or decompressed, and
decoded as text or rejected (binary, not UTF-8) with the line that failed.
"""

from __future__ import annotations

import bz2
import gzip
import io
from pathlib import Path

from tasks.ingest.records import SNIFF_BYTES, Reject

MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bz2", b"\x28\xb5\x2f\xfd": "zstd"}


def compression_of(head: bytes) -> str | None:
    return next((name for magic, name in MAGIC.items() if head.startswith(magic)), None)


def _open_binary(path: Path):
    with open(path, "rb") as f:
        kind = compression_of(f.read(4))
    if kind == "gzip":
        return gzip.open(path, "rb")
    if kind == "bz2":
        return bz2.open(path, "rb")
    if kind == "zstd":
        import pyarrow as pa  # zstd without another dependency

        return io.BufferedReader(_ArrowRaw(pa.CompressedInputStream(pa.OSFile(str(path), "rb"), "zstd")), 1 << 20)
    return open(path, "rb")


class _ArrowRaw(io.RawIOBase):
    """An Arrow input stream as a Python raw stream (for `readline` and `TextIOWrapper`)."""

    def __init__(self, stream):
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._stream.close()
        super().close()


def _decompress(data: bytes) -> bytes:
    kind = compression_of(data[:4])
    if kind == "gzip":
        return gzip.decompress(data)
    if kind == "bz2":
        return bz2.decompress(data)
    if kind == "zstd":
        return _zstd(data)
    return data


def _zstd(data: bytes) -> bytes:
    import pyarrow as pa

    with pa.CompressedInputStream(pa.BufferReader(data), "zstd") as stream:
        return stream.read()


def decode_text(data: bytes, location: str, label: str) -> str | Reject:
    """A text file's bytes as text, or the reject that says why not (NUL bytes: binary; not UTF-8: the line)."""
    if b"\x00" in data[:SNIFF_BYTES]:
        return Reject(location, "binary_file", "contains NUL bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return Reject(f"{label}:{line}", "invalid_utf8", f"byte {exc.start}: {exc.reason}")
