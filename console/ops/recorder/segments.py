"""The rolling record's files (docs/recorder.md): per host a folder of segments, each a run of gzip
members of JSON lines, one member per flush (once a second), so a crash or kill -9 loses at most the
records of the last second; a member cut short is dropped on reading. Segments rotate at a share of
the host's cap and the oldest go once the folder is over it.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from console.domain.redact import redact

#: Default size cap of one host's record (bytes); the host's `record_cap_mib` overrides it.
CAP_BYTES = 64 << 20
#: A segment is closed once it reaches this share of the cap (so rotation frees at most this much).
SEGMENTS_PER_CAP = 8
#: Records are buffered at most this long before they are compressed and written.
FLUSH_S = 1.0
PREFIX = "seg-"
SUFFIX = ".jsonl.gz"


def redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redacted(v) for v in value]
    return value


def _member(lines: list[bytes]) -> bytes:
    """One whole gzip member (header, deflate, trailer) of the lines."""
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    return packer.compress(b"".join(lines)) + packer.flush()


class RecordWriter:
    """Appends records (`ts`, `kind`, fields) to one host's record folder, redacted as the journal is."""

    def __init__(self, folder: Path, *, cap_bytes: int = CAP_BYTES, clock: Callable[[], float] = time.time,
                 flush_s: float = FLUSH_S) -> None:
        self.folder = folder
        self.cap_bytes = max(cap_bytes, 1 << 16)
        self.segment_bytes = max(self.cap_bytes // SEGMENTS_PER_CAP, 1 << 13)
        self._clock = clock
        self._flush_s = flush_s
        self._buffer: list[bytes] = []
        self._first_buffered: float | None = None
        self._fd: int | None = None
        self._segment: Path | None = None
        self._segment_size = 0
        self.bytes_written = 0
        self.records_written = 0
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    def add(self, kind: str, ts: float | None = None, **fields: Any) -> None:
        """Buffer one record; the buffer is written once it is `flush_s` old (call `tick` besides)."""
        now = self._clock()
        # fields that are None are left out (a reader takes a missing field as None): a fifth of a line
        record = {"ts": now if ts is None else ts, "kind": kind,
                  **{k: redacted(v) for k, v in fields.items() if v is not None}}
        self._buffer.append(json.dumps(record, separators=(",", ":")).encode() + b"\n")
        if self._first_buffered is None:
            self._first_buffered = now
        self.tick(now)

    def tick(self, now: float | None = None) -> None:
        """Write the buffer if it has waited `flush_s` (the owner calls this at least once a second)."""
        now = self._clock() if now is None else now
        if self._first_buffered is not None and now - self._first_buffered >= self._flush_s:
            self.flush()

    def flush(self) -> None:
        """Compress the buffered records into one gzip member and write it with one write."""
        if not self._buffer:
            return
        data = _member(self._buffer)
        self.records_written += len(self._buffer)
        self._buffer, self._first_buffered = [], None
        if self._fd is None or self._segment_size >= self.segment_bytes:
            self._rotate()
        assert self._fd is not None
        os.write(self._fd, data)
        self._segment_size += len(data)
        self.bytes_written += len(data)

    def close(self) -> None:
        self.flush()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _rotate(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        stamp = int(self._clock() * 1000)
        path = self.folder / f"{PREFIX}{stamp:015d}{SUFFIX}"
        while path.exists():  # two segments in one millisecond: the next name
            stamp += 1
            path = self.folder / f"{PREFIX}{stamp:015d}{SUFFIX}"
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._segment, self._segment_size = path, 0
        self._prune()

    def _prune(self) -> None:
        """Drop the oldest segments while the folder is over the cap (the open one is kept)."""
        segments = list_segments(self.folder)
        sizes = {p: _size(p) for p in segments}
        total = sum(sizes.values())
        for path in segments:
            if total <= self.cap_bytes - self.segment_bytes or path == self._segment:
                break
            path.unlink(missing_ok=True)
            total -= sizes[path]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def list_segments(folder: Path) -> list[Path]:
    """The folder's segments, oldest first (their names carry their start in milliseconds)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.startswith(PREFIX) and p.name.endswith(SUFFIX))


def folder_size(folder: Path) -> int:
    return sum(_size(p) for p in list_segments(folder))


def _members(data: bytes) -> Iterator[bytes]:
    """The whole members of a segment, decompressed; a member cut short (the crash's) is dropped."""
    while data:
        unpacker = zlib.decompressobj(31)
        try:
            text = unpacker.decompress(data)
        except zlib.error:
            return
        if not unpacker.eof:
            return
        yield text
        data = unpacker.unused_data


def read_segment(path: Path) -> Iterator[dict[str, Any]]:
    for text in _members(path.read_bytes()):
        for raw in text.splitlines():
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("ts"), (int, float)):
                yield record


def read_window(folder: Path, start: float = float("-inf"), end: float = float("inf")) -> list[dict[str, Any]]:
    """Every record with `start <= ts <= end`, in time order (stably: one moment keeps its written order)."""
    records: list[dict[str, Any]] = []
    segments = list_segments(folder)
    starts = [int(p.name[len(PREFIX):-len(SUFFIX)]) / 1000 for p in segments]
    for i, path in enumerate(segments):
        # a segment that began after the window holds nothing of it (records may carry an older ts:
        # a journal line's own time; allow the flush slack)
        if starts[i] > end + 2 * FLUSH_S + 60:
            break
        if i + 1 < len(starts) and starts[i + 1] < start - 60:
            continue
        records.extend(r for r in read_segment(path) if start <= r["ts"] <= end)
    records.sort(key=lambda r: r["ts"])
    return records
