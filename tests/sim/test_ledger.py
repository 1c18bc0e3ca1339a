"""The simulated GPU ledger: inventory, per-process files, liveness, snapshots."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from waiting import wait_for

from console.sim.host.build import LedgerGpuSource
from console.sim.ledger import (
    ProcLedger,
    ensure_inventory,
    gpu_uuid,
    pci_bus_id,
    pid_alive,
    read_inventory,
    read_processes,
    read_snapshot,
)

UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_inventory_is_stable_and_well_formed(tmp_path: Path) -> None:
    gpus = ensure_inventory(tmp_path, 8, 97887, host="gpu-node-1")
    assert [g.index for g in gpus] == list(range(8))
    assert all(UUID.match(g.uuid) for g in gpus) and len({g.uuid for g in gpus}) == 8
    assert gpus[0].pci_bus_id == "00000000:1B:00.0"
    assert [pci_bus_id(i) for i in range(8)] == sorted(pci_bus_id(i) for i in range(8))
    assert ensure_inventory(tmp_path, 8, 97887, host="another-host") == gpus  # kept, not rewritten
    assert read_inventory(tmp_path) == gpus
    assert gpu_uuid("gpu-node-1", 3) != gpu_uuid("gpu-node-2", 3)
    doc = json.loads((tmp_path / "gpus.json").read_text())
    assert set(doc["gpus"][0]) == {"index", "uuid", "name", "total_mib", "pci_bus_id"}
    resized = ensure_inventory(tmp_path, 4, 81559, "NVIDIA H100 80GB HBM3", host="gpu-node-1")
    assert len(resized) == 4 and read_inventory(tmp_path)[0].total_mib == 81559


def test_processes_add_up_and_dead_ones_are_ignored(tmp_path: Path) -> None:
    ensure_inventory(tmp_path, 2, 97887, host="gpu-node-1")
    mine = ProcLedger(tmp_path, name="sglang::scheduler")
    mine.set(0, used_mib=70000, util_pct=55)
    mine.set(1, used_mib=1200)
    mine.flush()
    stale = ProcLedger(tmp_path, pid=_dead_pid(), name="ghost")
    stale.set(0, used_mib=5000)
    stale.flush()
    (tmp_path / "proc-999999999.json").write_text("{not json")
    assert [r.pid for r in read_processes(tmp_path)] == [os.getpid()]
    snap = read_snapshot(tmp_path)
    assert [g.used_mib for g in snap.gpus] == [70000, 1200]
    assert snap.gpus[0].util_pct == 55 and snap.gpus[1].util_pct == 0
    assert snap.gpus[0].temp_c > snap.gpus[1].temp_c
    assert [(p.pid, p.gpu_index, p.used_mib) for p in snap.processes] == [
        (os.getpid(), 0, 70000), (os.getpid(), 1, 1200)]
    assert snap.processes[0].gpu_uuid == snap.gpus[0].uuid
    mine.remove()
    mine.remove()
    assert [g.used_mib for g in read_snapshot(tmp_path).gpus] == [0, 0]


def test_flush_writes_only_changes_atomically(tmp_path: Path) -> None:
    led = ProcLedger(tmp_path)
    led.set(0, used_mib=10)
    led.flush()
    first = led.path.stat().st_mtime_ns
    led.flush()
    assert led.path.stat().st_mtime_ns == first
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert json.loads(led.path.read_text())["used_mib"] == {"0": 10}


def test_missing_inventory_is_an_error_snapshot(tmp_path: Path) -> None:
    snap = read_snapshot(tmp_path / "nowhere")
    assert snap.gpus == () and "no GPU inventory" in (snap.error or "")


def test_pid_alive_sees_zombies_as_dead() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        wait_for(lambda: Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z",
                 "the child to be a zombie", interval_s=0.01)
        assert not pid_alive(proc.pid)
    finally:
        proc.wait()
    assert pid_alive(os.getpid())


async def test_ledger_gpu_source_samples_and_streams(tmp_path: Path) -> None:
    ensure_inventory(tmp_path, 2, 97887, host="gpu-node-1")
    led = ProcLedger(tmp_path)
    led.set(1, used_mib=4242)
    led.flush()
    source = LedgerGpuSource(tmp_path)
    snap = await source.sample()
    assert snap.gpus[1].used_mib == 4242
    stream = source.stream(0.01)
    seen = [await anext(stream), await anext(stream)]
    await stream.aclose()
    assert all(s.gpus[1].used_mib == 4242 for s in seen)
    led.remove()
