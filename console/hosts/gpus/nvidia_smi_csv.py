"""What `nvidia-smi` prints, read into typed values: the CSV query argv and its parsers.

Pure text in, frozen GpuSample/GpuProcess out, with no transport and no clock. This is the seam where
a host's bytes become values (missing cells become None, control characters become visible escapes),
so the parsers are tested on their own, property tests included; gpus.py runs the commands.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence

from console.domain.safe_text import printable
from console.domain.values import GpuProcess, GpuSample

__all__ = [
    "APP_FIELDS",
    "GPU_FIELDS",
    "QUERY_APPS",
    "QUERY_GPU",
    "csv_rows",
    "garbage_note",
    "parse_apps",
    "parse_gpu_line",
    "parse_gpus",
]

GPU_FIELDS = (
    "index",
    "uuid",
    "name",
    "memory.total",
    "memory.used",
    "utilization.gpu",
    "temperature.gpu",
    "pci.bus_id",
    "power.draw",
)
#: Rows shorter than this are no GPU rows; `power.draw` (the last field) may be missing from older rows.
_MIN_GPU_FIELDS = len(GPU_FIELDS) - 1
APP_FIELDS = ("pid", "gpu_uuid", "used_memory")
_FORMAT = "--format=csv,noheader,nounits"
QUERY_GPU = ["nvidia-smi", "--query-gpu=" + ",".join(GPU_FIELDS), _FORMAT]
QUERY_APPS = ["nvidia-smi", "--query-compute-apps=" + ",".join(APP_FIELDS), _FORMAT]
_MISSING = {
    "",
    "n/a",
    "[n/a]",
    "[not supported]",
    "not supported",
    "[unknown error]",
    "[insufficient permissions]",
}


def _cell(value: str) -> str | None:
    """One CSV field as shown: host text, so controls and bidi characters become visible escapes."""
    value = printable(value.strip())
    return None if value.lower() in _MISSING else value


def _int(value: str) -> int | None:
    cell = _cell(value)
    if cell is None:
        return None
    try:
        return int(float(cell))
    except (ValueError, OverflowError):  # "nan", "inf" and other garbage
        return None


def csv_rows(text: str) -> list[list[str]]:
    """The non-empty CSV rows of nvidia-smi output, split at commas, leading spaces dropped."""
    return [row for row in csv.reader(text.splitlines(), skipinitialspace=True) if row]


def _float(cell: str) -> float | None:
    """A number cell (`61.52`), None when nvidia-smi says it has none (`[N/A]`) or it is not a number."""
    text = _cell(cell)
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def parse_gpu_line(row: Sequence[str]) -> GpuSample | None:
    """One `--query-gpu` CSV row; None when it is not a GPU row (garbage, a warning line)."""
    if len(row) < _MIN_GPU_FIELDS:
        return None
    index = _int(row[0])
    if index is None:
        return None
    return GpuSample(
        index=index,
        uuid=_cell(row[1]),
        name=_cell(row[2]),
        total_mib=_int(row[3]),
        used_mib=_int(row[4]),
        util_pct=_int(row[5]),
        temp_c=_int(row[6]),
        pci_bus_id=_cell(row[7]),
        power_w=_float(row[8]) if len(row) > 8 else None,
    )


def garbage_note(bad: list[str]) -> str | None:
    """One line about the output lines that were not rows we read, or None when there were none."""
    if not bad:
        return None
    return f"nvidia-smi: {len(bad)} unreadable line(s), e.g. {printable(repr(bad[0][:80]))}"


def parse_gpus(text: str) -> tuple[list[GpuSample], str | None]:
    """All GPU rows of a `--query-gpu` output, plus a note about lines that were not GPU rows."""
    gpus, bad = [], []
    for row in csv_rows(text):
        sample = parse_gpu_line(row)
        if sample is None:
            bad.append(", ".join(row))
        else:
            gpus.append(sample)
    return gpus, garbage_note(bad)


def parse_apps(text: str, gpus: Sequence[GpuSample] = ()) -> tuple[list[GpuProcess], str | None]:
    """`--query-compute-apps` rows, with each process's GPU index looked up by UUID."""
    by_uuid = {g.uuid: g.index for g in gpus if g.uuid}
    procs, bad = [], []
    for row in csv_rows(text):
        pid = _int(row[0]) if row else None
        if pid is None or len(row) < len(APP_FIELDS):
            if "no running" not in ", ".join(row).lower():
                bad.append(", ".join(row))
            continue
        uuid = _cell(row[1])
        procs.append(GpuProcess(pid=pid, gpu_uuid=uuid, gpu_index=by_uuid.get(uuid), used_mib=_int(row[2])))
    return procs, garbage_note(bad)
