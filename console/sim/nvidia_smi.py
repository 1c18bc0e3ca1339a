"""An `nvidia-smi` stand-in for the simulated host, reading the GPU ledger.

It speaks the subset the console and people use: `--query-gpu=...`, `--query-compute-apps=...`,
`--format=csv[,noheader][,nounits]`, `-i`, `-l`/`-lms` loops, `-L`, `-q [-d PERFORMANCE,POWER,CLOCK]`
(nvidia_smi_query.py), and the bare summary table.
Output matches nvidia-smi's CSV byte for byte (`, ` separators, `[MiB]` headers, units in values
unless `nounits`). Stdlib only, so it runs under the test hosts' plain python3.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from console.domain.sizes import MIB
from console.domain.values import GpuProcess, GpuSample, GpuSnapshot
from console.sim import ledger as ledger_mod
from console.sim.nvidia_smi_query import UnknownDisplay, displays_of, query_lines
from console.sim.nvidia_smi_table import render_table

DRIVER_VERSION = "575.57.08"
CUDA_VERSION = "12.9"
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


@dataclass(frozen=True, slots=True)
class Field:
    """One queryable property: its CSV header, its unit (shown unless `nounits`) and its value."""

    header: str
    unit: str | None
    value: Callable[..., object]


def _reserved_mib(g: GpuSample) -> int:
    # The driver keeps a slice of each card for itself: 97887 MiB cards give PyTorch 94.97 GiB.
    from console.domain.fit import torch_capacity_bytes

    total = g.total_mib or 0
    return max(0, total - torch_capacity_bytes(total) // MIB)


def _power_w(g: GpuSample) -> str:
    if g.power_w is not None:  # the ledger's draw (a stall's spinning card), else it follows utilisation
        return f"{g.power_w:.2f}"
    return f"{38.0 + (g.util_pct or 0) * 5.2 + g.index * 0.37:.2f}"


def _timestamp() -> str:
    now = time.time()
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"


GPU_FIELDS: dict[str, Field] = {
    "timestamp": Field("timestamp", None, lambda g, n: _timestamp()),
    "driver_version": Field("driver_version", None, lambda g, n: DRIVER_VERSION),
    "count": Field("count", None, lambda g, n: n),
    "index": Field("index", None, lambda g, n: g.index),
    "name": Field("name", None, lambda g, n: g.name),
    "uuid": Field("uuid", None, lambda g, n: g.uuid),
    "pci.bus_id": Field("pci.bus_id", None, lambda g, n: g.pci_bus_id),
    "memory.total": Field("memory.total [MiB]", "MiB", lambda g, n: g.total_mib),
    "memory.reserved": Field("memory.reserved [MiB]", "MiB", lambda g, n: _reserved_mib(g)),
    "memory.used": Field("memory.used [MiB]", "MiB", lambda g, n: g.used_mib),
    "memory.free": Field(
        "memory.free [MiB]", "MiB",
        lambda g, n: max(0, (g.total_mib or 0) - _reserved_mib(g) - (g.used_mib or 0)),
    ),
    "utilization.gpu": Field("utilization.gpu [%]", "%", lambda g, n: g.util_pct),
    "utilization.memory": Field(
        "utilization.memory [%]", "%", lambda g, n: round((g.util_pct or 0) * 0.55)
    ),
    "temperature.gpu": Field("temperature.gpu", None, lambda g, n: g.temp_c),
    "power.draw": Field("power.draw [W]", "W", lambda g, n: _power_w(g)),
}
GPU_ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id",
               "memory.used_mib": "memory.used"}

APP_FIELDS: dict[str, Field] = {
    "timestamp": Field("timestamp", None, lambda p, g: _timestamp()),
    "gpu_name": Field("gpu_name", None, lambda p, g: g.name),
    "gpu_bus_id": Field("gpu_bus_id", None, lambda p, g: g.pci_bus_id),
    "gpu_uuid": Field("gpu_uuid", None, lambda p, g: p.gpu_uuid),
    "pid": Field("pid", None, lambda p, g: p.pid),
    "process_name": Field("process_name", None, lambda p, g: p.name),
    "used_memory": Field("used_gpu_memory [MiB]", "MiB", lambda p, g: p.used_mib),
}
APP_ALIASES = {"name": "process_name", "used_gpu_memory": "used_memory"}


class InvalidField(Exception):
    """A field nvidia-smi does not know."""


def resolve_fields(spec: str, table: dict[str, Field], aliases: dict[str, str]) -> list[Field]:
    """The fields of a comma-separated query, in order; raises InvalidField on the first unknown."""
    fields = []
    for raw in spec.split(","):
        name = raw.strip()
        key = aliases.get(name, name)
        if key not in table:
            raise InvalidField(name)
        fields.append(table[key])
    return fields


def _cell(field: Field, value: object, nounits: bool) -> str:
    if value is None:
        return "[N/A]"
    if field.unit is None or nounits:
        return str(value)
    return f"{value} {field.unit}"


def csv_lines(
    fields: Sequence[Field], rows: Sequence[Sequence[object]], *, header: bool, nounits: bool
) -> list[str]:
    """nvidia-smi's CSV: `, ` between cells, the header first unless `noheader`."""
    out = [", ".join(f.header for f in fields)] if header else []
    for row in rows:
        out.append(", ".join(_cell(f, v, nounits) for f, v in zip(fields, row, strict=True)))
    return out


def _select(snapshot: GpuSnapshot, ids: str | None) -> list[GpuSample]:
    if not ids:
        return list(snapshot.gpus)
    wanted = {part.strip() for part in ids.split(",")}
    return [g for g in snapshot.gpus if str(g.index) in wanted or g.uuid in wanted
            or g.pci_bus_id in wanted]


def gpu_rows(snapshot: GpuSnapshot, fields: Sequence[Field], ids: str | None) -> list[list[object]]:
    gpus = _select(snapshot, ids)
    return [[f.value(g, len(snapshot.gpus)) for f in fields] for g in gpus]


def app_rows(snapshot: GpuSnapshot, fields: Sequence[Field], ids: str | None) -> list[list[object]]:
    gpus = {g.index: g for g in _select(snapshot, ids)}
    procs: list[tuple[GpuProcess, GpuSample]] = [
        (p, gpus[p.gpu_index]) for p in snapshot.processes if p.gpu_index in gpus
    ]
    procs.sort(key=lambda pg: (pg[1].index, pg[0].pid))
    return [[f.value(p, g) for f in fields] for p, g in procs]


@dataclass
class Options:
    """The parsed command line."""

    query_gpu: str | None = None
    query_apps: str | None = None
    fmt: str | None = None
    ids: str | None = None
    loop_s: float | None = None
    list_gpus: bool = False
    query: bool = False
    displays: str | None = None


def parse_args(argv: Sequence[str]) -> Options:
    """nvidia-smi's option syntax: `--opt=value`, `--opt value`, `-lms N`, `-l N`, `-i N`."""
    opts = Options()
    args = list(argv)
    i = 0

    def value(name: str) -> str:
        nonlocal i
        arg = args[i]
        if "=" in arg:
            return arg.split("=", 1)[1]
        if i + 1 >= len(args):
            raise ValueError(f'Option "{name}" requires a value.')
        i += 1
        return args[i]

    while i < len(args):
        arg = args[i]
        key = arg.split("=", 1)[0]
        if key == "--query-gpu":
            opts.query_gpu = value(key)
        elif key == "--query-compute-apps":
            opts.query_apps = value(key)
        elif key == "--format":
            opts.fmt = value(key)
        elif key in ("-i", "--id"):
            opts.ids = value(key)
        elif key in ("-lms", "--loop-ms"):
            opts.loop_s = max(int(value(key)), 1) / 1000.0
        elif key in ("-l", "--loop"):
            opts.loop_s = float(max(int(value(key)), 1))
        elif key in ("-L", "--list-gpus"):
            opts.list_gpus = True
        elif key in ("-q", "--query"):
            opts.query = True
        elif key in ("-d", "--display"):
            opts.displays = value(key)
        else:
            raise ValueError('Invalid combination of input arguments. Please run "nvidia-smi -h" for help.')
        i += 1
    return opts


def render(opts: Options, snapshot: GpuSnapshot, *, first: bool) -> list[str]:
    """The lines of one sample."""
    if opts.list_gpus:
        return [f"GPU {g.index}: {g.name} (UUID: {g.uuid})" for g in snapshot.gpus]
    if opts.query:
        return query_lines(snapshot, displays_of(opts.displays), _select(snapshot, opts.ids),
                           driver=DRIVER_VERSION, cuda=CUDA_VERSION, power_w=_power_w)
    fmt = {part.strip() for part in (opts.fmt or "").split(",")}
    header = first and "noheader" not in fmt
    nounits = "nounits" in fmt
    if opts.query_gpu is not None:
        fields = resolve_fields(opts.query_gpu, GPU_FIELDS, GPU_ALIASES)
        return csv_lines(fields, gpu_rows(snapshot, fields, opts.ids), header=header, nounits=nounits)
    if opts.query_apps is not None:
        fields = resolve_fields(opts.query_apps, APP_FIELDS, APP_ALIASES)
        return csv_lines(fields, app_rows(snapshot, fields, opts.ids), header=header, nounits=nounits)
    return render_table(snapshot, driver=DRIVER_VERSION, cuda=CUDA_VERSION)


def main(argv: Sequence[str] | None = None) -> int:
    """Run like nvidia-smi: exit 0, 2 for a bad argument or field, 9 when there is no 'driver'."""
    try:
        opts = parse_args(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        sys.stdout.write(f"{exc}\n\n")
        return 2
    if (opts.query_gpu or opts.query_apps) and not (opts.fmt or "").startswith("csv"):
        sys.stdout.write('Option "--format" is required with "--query-*" options.\n\n')
        return 2
    directory = ledger_mod.ledger_dir_from_env()
    first = True
    try:
        while True:
            snapshot = ledger_mod.read_snapshot(directory)
            if not snapshot.gpus:
                sys.stdout.write(NO_DRIVER)
                return 9
            try:
                lines = render(opts, snapshot, first=first)
            except InvalidField as exc:
                sys.stdout.write(f'Field "{exc}" is not a valid field to query.\n\n')
                return 2
            except UnknownDisplay as exc:
                sys.stdout.write(f'Invalid display type "{exc}". Please run "nvidia-smi -h" for help.\n\n')
                return 2
            if lines:
                sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()
            if opts.loop_s is None:
                return 0
            first = False
            time.sleep(opts.loop_s)
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        # The reader went away (`| head`): exit quietly, as nvidia-smi does, without a flush error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
