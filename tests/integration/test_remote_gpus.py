"""GPUs over SSH against the test hosts' nvidia-smi stand-in: the -lms stream, the per-process view,
and mapping a CUDA index through the unit's real environment."""

from __future__ import annotations

import pytest
from remote_helpers import bed_host_config, wait_until

from console.hosts.gpus.nvidia_smi import map_cuda_index
from console.hosts.remote import build_remote_host

pytestmark = pytest.mark.integration
UNIT = "sglang-k26-ep8.service"


async def test_gpu_stream_processes_and_cuda_order_mapping(clean_testbed):
    bed = clean_testbed
    bed.write_file("tb1", "/etc/serve-console/sim.env", "SERVE_CONSOLE_SIM_TIME_SCALE=0.02\n")
    host = build_remote_host(bed_host_config(bed, "tb1", gpus="nvidia-smi"))
    stream = host.gpus.stream(0.2)
    try:
        first = await anext(stream)
        assert len(first.gpus) == 8 and first.error is None
        assert {g.total_mib for g in first.gpus} == {97887}
        assert all(g.pci_bus_id and g.uuid for g in first.gpus)

        await host.services.start(UNIT)
        main_pid = await wait_until(lambda: _main_pid(host), 30, "EP8 running")

        async def loaded():
            snap = await anext(stream)
            return snap if snap.processes and sum(g.used_mib or 0 for g in snap.gpus) > 0 else None

        snap = await wait_until(loaded, 60, "the engine's memory in the stream")
        assert snap.error is None and len(snap.gpus) == 8
        assert {p.gpu_index for p in snap.processes} <= set(range(8))
        assert any(p.pid for p in snap.processes) and main_pid

        env = await host.services.environment(UNIT)
        assert env.get("SERVE_CONSOLE_SIM_TIME_SCALE") == "0.02"  # read from the EnvironmentFile
        index, why = map_cuda_index(2, snap.gpus, env)
        assert index is None and "unknown" in why

        dropin = f"/etc/systemd/system/{UNIT}.d/cuda-order.conf"
        await host.services.write_file(dropin, "[Service]\nEnvironment=CUDA_DEVICE_ORDER=PCI_BUS_ID\n")
        await host.services.daemon_reload()
        env = await host.services.environment(UNIT)
        index, why = map_cuda_index(2, snap.gpus, env)
        by_bus = sorted(snap.gpus, key=lambda g: g.pci_bus_id or "")
        assert index == by_bus[2].index and "PCI_BUS_ID" in why
    finally:
        await stream.aclose()
        await host.services.stop(UNIT)
        await host.transport.run(["rm", "-rf", f"/etc/systemd/system/{UNIT}.d"])
        await host.services.daemon_reload()
        await host.close()


async def _main_pid(host) -> int | None:
    state = await host.services.state(UNIT)
    return state.main_pid if state.active == "active" else None
