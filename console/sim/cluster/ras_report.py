"""NCCL RAS's `STATUS` report, as the `ncclras` client prints it (NCCL 2.27's text format).

Built the way NVIDIA/nccl src/ras/client_support.cc builds it (rasClientRunInit, rasClientRunComms):
the versions, the job summary, the communicators grouped by size, node count, status and errors, then
the errors (processes that sent no data: INCOMPLETE; processes unreachable for the dead timeout: DEAD;
per communicator, the ranks missing) and the warnings. A list of processes or ranks is printed only for
an outlier count (one, or at most ten; every count with VERBOSE STATUS), as rasCountIsOutlier decides.
docs/ras.md keeps a real report beside this one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from console.sim.cluster.liveness import DEAD, OK

NCCL_VERSION, CUDA_VERSION, CUDA_RUNTIME, CUDA_DRIVER = "2.27.7", "12.9", 12090, 12090
DETAIL_THRESHOLD, OUTLIER_FRACTION, VERBOSE_OUTLIER_FRACTION = 10, 0.25, 0.5


@dataclass(frozen=True, slots=True)
class RasProcess:
    """One rank's process as the RAS network knows it."""

    rank: int
    pid: int
    ip: str
    cuda_dev: int
    nvml_dev: int
    state: str
    """liveness.OK, UNRESPONSIVE (sent no data) or DEAD (unreachable past the dead timeout)."""


@dataclass(frozen=True, slots=True)
class RasComm:
    """One NCCL communicator: its hash and its members' global ranks, in communicator-rank order."""

    comm_hash: int
    ranks: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class _CommRow:
    comm: RasComm
    present: tuple[RasProcess, ...]
    missing: tuple[tuple[int, RasProcess], ...]
    """(communicator rank, process) of each member that sent no data."""

    @property
    def nodes(self) -> int:
        return len({p.ip for p in self.present})

    def per_node(self) -> tuple[int, int]:
        counts = [sum(p.ip == ip for p in self.present) for ip in {p.ip for p in self.present}]
        return min(counts), max(counts)

    @property
    def errors(self) -> str:
        return "INCOMPLETE" if self.missing else "OK"

    def key(self) -> tuple[int, int, str]:
        return len(self.comm.ranks), self.nodes, self.errors


def _outlier(count: int, verbose: bool, total: int = -1) -> bool:
    if count == 1:
        return True
    if verbose:
        return count < total * VERBOSE_OUTLIER_FRACTION if total != -1 else True
    return count <= DETAIL_THRESHOLD and (total == -1 or count <= total * OUTLIER_FRACTION)


def _gpu(cuda_dev: int, nvml_dev: int) -> str:
    return f"{cuda_dev}" if cuda_dev == nvml_dev else f"{cuda_dev} (NVML {nvml_dev})"


def _plural(count: int, word: str, suffix: str = "s") -> str:
    return f"{count} {word}{suffix if count > 1 else ''}"


def job_summary(processes: Sequence[RasProcess]) -> str:
    """The job summary table (the single-row form when every node runs as many one-GPU processes)."""
    per_node = {ip: sum(p.ip == ip for p in processes) for ip in {p.ip for p in processes}}
    out = "Job summary\n===========\n\n"
    if len(set(per_node.values())) <= 1:
        out += ("  Nodes  Processes         GPUs  Processes     GPUs\n"
                "(total)   per node  per process    (total)  (total)\n"
                f"{len(per_node):7d}  {max(per_node.values(), default=0):9d}  {1:11d}  {len(processes):9d}"
                f"  {len(processes):7d}\n")
        return out
    counts = sorted({n: list(per_node.values()).count(n) for n in per_node.values()}.items(),
                    key=lambda kv: (-kv[1], -kv[0]))
    out += "  Nodes  Processes         GPUs\n          per node  per process\n"
    out += "".join(f"{nodes:7d}  {procs:9d}  {1:11d}\n" for procs, nodes in counts)
    out += ("\n  Nodes  Processes         GPUs\n(total)    (total)      (total)\n"
            f"{len(per_node):7d}  {len(processes):9d}  {len(processes):11d}\n")
    return out


def _rows(processes: Sequence[RasProcess], comms: Sequence[RasComm]) -> list[_CommRow]:
    by_rank = {p.rank: p for p in processes}
    rows = []
    for comm in comms:
        members = [(i, by_rank[r]) for i, r in enumerate(comm.ranks) if r in by_rank]
        present = tuple(p for _, p in members if p.state == OK)
        if present:  # a communicator none of whose ranks answered is unknown to the report
            rows.append(_CommRow(comm, present, tuple((i, p) for i, p in members if p.state != OK)))
    # Largest first; then more nodes; then errors before OK (as rasAuxCommsCompareRev sorts them).
    rows.sort(key=lambda row: (-len(row.comm.ranks), -row.nodes, row.errors == "OK", len(row.present)))
    return rows


def communicators(rows: Sequence[_CommRow]) -> tuple[str, list[list[_CommRow]]]:
    """The communicators table, and the rows in their groups."""
    groups: list[list[_CommRow]] = []
    for row in rows:
        if groups and groups[-1][0].key() == row.key():
            groups[-1].append(row)
        else:
            groups.append([row])
    if not groups:
        return "No communicator data collected!\n", groups
    out = ("Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
           "    #  in group  per comm  per node  per comm  in group\n")
    for index, group in enumerate(groups):
        low = min(row.per_node()[0] for row in group)
        high = max(row.per_node()[1] for row in group)
        per_node = f"{low}" if low == high else f"{low}-{high}"
        gpus = len({(p.ip, p.pid, p.nvml_dev) for row in group for p in row.present})
        first = group[0]
        out += (f"{index:5d}  {len(group):8d}  {first.nodes:8d}  {per_node:>8s}  {len(first.comm.ranks):8d}"
                f"  {gpus:8d}  {'RUNNING':>8s}  {first.errors:>6s}\n")
    return out, groups


def _process_lines(procs: Sequence[RasProcess]) -> str:
    ordered = sorted(procs, key=lambda p: (tuple(int(x) if x.isdigit() else 0 for x in p.ip.split(".")), p.pid))
    return "".join(f"  Process {p.pid} on node {p.ip} managing GPU {_gpu(p.cuda_dev, p.nvml_dev)}\n"
                   for p in ordered)


def errors(processes: Sequence[RasProcess], groups: Sequence[Sequence[_CommRow]], verbose: bool) -> str:
    """The Errors section: missing processes, dead processes, then each incomplete communicator."""
    out = "\nErrors\n======\n\n"
    missing = [p for p in processes if p.state not in (OK, DEAD)]
    dead = [p for p in processes if p.state == DEAD]
    if missing:
        out += f"INCOMPLETE\n  Missing communicator data from {len(missing)} job process{'es' * (len(missing) > 1)}\n"
        out += (_process_lines(missing) if _outlier(len(missing), verbose) else "") + "\n"
    if dead:
        verb = "es are" if len(dead) > 1 else " is"
        out += f"DEAD\n  {len(dead)} job process{verb} considered dead (unreachable via the RAS network)\n"
        out += (_process_lines(dead) if _outlier(len(dead), verbose) else "") + "\n"
    for index, group in enumerate(groups):
        for position, row in enumerate(group):
            if not row.missing:
                continue
            out += (f"#{index}-{position} ({row.comm.comm_hash:016x}) INCOMPLETE\n"
                    f"  Missing communicator data from {_plural(len(row.missing), 'rank')}\n")
            if _outlier(len(row.missing), verbose):
                out += "".join(f"  Rank {comm_rank} -- GPU {_gpu(p.cuda_dev, p.nvml_dev)} managed by process "
                               f"{p.pid} on node {p.ip}\n" for comm_rank, p in row.missing)
            out += "\n"
    return out


def status_report(processes: Sequence[RasProcess], comms: Sequence[RasComm], *, verbose: bool = False,
                  collection_s: float = 0.0) -> list[str]:
    """The report's text, in the pieces the RAS thread sends (the client prints them as they come)."""
    head = (f"NCCL version {NCCL_VERSION} compiled with CUDA {CUDA_VERSION}\n"
            f"CUDA runtime version {CUDA_RUNTIME}, driver version {CUDA_DRIVER}\n\n")
    table, groups = communicators(_rows(processes, comms))
    return [
        head,
        job_summary(processes) + "\nCommunicators...",
        f" ({collection_s:.2f}s)\n=============\n\n" + table,
        errors(processes, groups, verbose),
        "Warnings\n========\n\n",
    ]
