"""The incident bundle's file (docs/bundle.md): one gzip'd file of JSON lines, a header first, the
timeline on one clock (wall-clock seconds, `ts`), the evidence folder's files, and an end line that
says the file is whole. Every string passes through the journal's redaction before it is written.
"""

from __future__ import annotations

import gzip
import ipaddress
import json
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.domain.redact import redact
from console.errors import UsageError

FORMAT = "serve-console-bundle/1"
SUFFIX = ".jsonl.gz"
#: Records of the timeline, printed by `replay --json` in time order.
#: `metrics`, `gpu`, `health` and `triage` come from the rolling record (docs/recorder.md).
TIMELINE = ("journal", "unit_state", "switch", "verdict", "card", "evidence", "metrics", "gpu", "health", "triage")


class BundleError(UsageError):
    """A file that is not a whole bundle; the message names the file (and line) and why, in one line."""


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def write_records(path: Path, header: dict[str, Any], records: Iterable[dict[str, Any]], *,
                  redacted: bool = False) -> int:
    """Write a bundle (mode 0600, by rename, so a half-written file is never taken for one); its byte size.

    `redacted`: the records have passed the redaction already (the rolling record's); the header still does.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    count = 1
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
        lines = [json.dumps(_redacted({"record": "header", "format": FORMAT, **header}))]
        for record in records:
            lines.append(json.dumps(record if redacted else _redacted(record)))
            count += 1
            if len(lines) >= 4096:  # one compressor call per few thousand lines, not per line
                out.write("\n".join(lines).encode() + b"\n")
                lines = []
        lines.append(json.dumps({"record": "end", "records": count}))
        out.write("\n".join(lines).encode() + b"\n")
    os.replace(tmp, path)
    return path.stat().st_size


@dataclass(frozen=True, slots=True)
class Bundle:
    """A bundle read back: its header, its timeline (time order) and its evidence files by name."""

    path: Path
    header: dict[str, Any]
    timeline: tuple[dict[str, Any], ...]
    evidence_files: dict[str, str]

    @property
    def incident(self) -> dict[str, Any]:
        return self.header.get("incident") or {}

    def verdict(self) -> dict[str, Any] | None:
        return next((r["result"] for r in self.timeline if r["record"] == "verdict"), None)


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        with gzip.open(path, "rb") as stream:
            for number, raw in enumerate(stream, 1):
                try:
                    record = json.loads(raw)
                except ValueError:
                    raise BundleError(f"{path}:{number}: not a JSON line of a bundle") from None
                if not isinstance(record, dict) or not isinstance(record.get("record"), str):
                    raise BundleError(f"{path}:{number}: a bundle's line is an object with a `record` kind")
                yield number, record
    except OSError as exc:  # gzip.BadGzipFile is one
        raise BundleError(f"{path}: not a serve-console bundle ({exc.strerror or exc})") from None
    except (EOFError, zlib.error):
        raise BundleError(f"{path}: not a whole bundle (the compressed stream ends early)") from None


def read_bundle(path: Path) -> Bundle:
    """Read and check a bundle.

    Raises:
        BundleError: not gzip, not this format, a bad line, or no end line (cut short).
    """
    header: dict[str, Any] | None = None
    timeline: list[dict[str, Any]] = []
    files: dict[str, str] = {}
    ended = False
    for number, record in _records(path):
        kind = record["record"]
        if number == 1:
            if kind != "header" or not str(record.get("format", "")).startswith("serve-console-bundle/"):
                raise BundleError(f"{path}:1: not a serve-console bundle (no `{FORMAT}` header)")
            if record["format"] != FORMAT:
                raise BundleError(f"{path}:1: bundle format {record['format']!r}; this console reads {FORMAT!r}")
            header = record
        elif kind == "end":
            ended = True
        elif kind == "evidence_file":
            files[str(record.get("file"))] = str(record.get("text", ""))
        elif kind in TIMELINE:
            if not isinstance(record.get("ts"), (int, float)):
                raise BundleError(f"{path}:{number}: a {kind} record without its time (`ts`)")
            timeline.append(record)
    if header is None:
        raise BundleError(f"{path}: an empty file, not a serve-console bundle")
    if not ended:
        raise BundleError(f"{path}: not a whole bundle (no end line: it was cut short)")
    timeline.sort(key=lambda r: r["ts"])  # stable: records of one moment keep their written order
    return Bundle(path=path, header=header, timeline=tuple(timeline), evidence_files=files)


# -- sharing: host names and addresses replaced ------------------------------------------------------
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")


def host_names(bundle: Bundle) -> list[str]:
    """The names and addresses the header knows, longest first (so `gpu-node-10` goes before `gpu-node-1`)."""
    names = {bundle.header.get("host") or ""}
    for node in bundle.header.get("nodes") or []:
        names |= {node.get("name") or "", node.get("address") or ""}
    return sorted((n for n in names if n), key=len, reverse=True)


def redact_hosts(bundle: Bundle, out: Path) -> int:
    """Write a copy of `bundle` with each host's name and address, and every IPv4 address, replaced:
    names by `host-1`, `host-2`, ... (the same one everywhere), addresses by 192.0.2.N. Its byte size."""
    aliases: dict[str, str] = {}
    for name in host_names(bundle):
        aliases[name] = f"192.0.2.{len(aliases) + 1}" if _is_ip(name) else f"host-{len(aliases) + 1}"
    # whole names only: `gpu-node-1` is not the start of `gpu-node-10`, `demo` not of `demonstrate`
    names = "|".join(re.escape(n) for n in aliases)
    pattern = re.compile(rf"(?<![\w.])(?:{names})(?!\w)") if aliases else None

    def ip(m: re.Match[str]) -> str:
        if not _is_ip(m.group(0)) or m.group(0).startswith("192.0.2.") or ipaddress.ip_address(m.group(0)).is_loopback:
            return m.group(0)
        return aliases.setdefault(m.group(0), f"192.0.2.{len(aliases) + 1}")

    def swap(value: Any) -> Any:
        if isinstance(value, str):
            text = pattern.sub(lambda m: aliases[m.group(0)], value) if pattern else value
            return _IPV4.sub(ip, text)
        if isinstance(value, dict):
            return {swap(k): swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    header = {k: v for k, v in bundle.header.items() if k not in ("record", "format")}
    files = [{"record": "evidence_file", "file": f, "text": t} for f, t in bundle.evidence_files.items()]
    return write_records(out, swap({**header, "hosts_redacted": True}), swap([*bundle.timeline, *files]))


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def latest_bundle(root: Path, host: str, service: str) -> Path | None:
    """The newest whole bundle of `service` on `host` under `root` (its header says whose), None when none.

    Names begin with their UTC stamp, so the newest sorts last; half-written ones (dot-named) are skipped.
    """
    if not root.is_dir():
        return None
    for path in sorted((p for p in root.iterdir() if p.name.endswith(SUFFIX) and not p.name.startswith(".")),
                       reverse=True):
        try:
            with gzip.open(path, "rb") as stream:
                first = json.loads(stream.readline())
        except (OSError, EOFError, zlib.error, ValueError):
            continue
        if isinstance(first, dict) and first.get("host") == host and first.get("service") == service:
            return path
    return None
