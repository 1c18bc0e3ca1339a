"""nvidia-smi CSV parsing, the streaming source, memory history and CUDA-order mapping."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.domain.values import CommandResult, GpuSample, GpuSnapshot
from console.hosts.argv import CommandFailed, TransportLost
from console.hosts.gpus.nvidia_smi import GpuHistory, NvidiaSmiSource, map_cuda_index, parse_apps, parse_gpus

NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
GPUS = "".join(
    f"{i}, GPU-{i:08d}-aaaa, {NAME}, 97887, {1000 * i}, {10 * i}, {30 + i}, 00000000:{0x10 + i:02X}:00.0\n"
    for i in range(4)
)


def test_gpu_rows_parse_into_samples():
    gpus, note = parse_gpus(GPUS)
    assert note is None and len(gpus) == 4
    assert gpus[2] == GpuSample(2, "GPU-00000002-aaaa", NAME, 97887, 2000, 20, 32, "00000000:12:00.0")


def test_not_available_fields_become_none_and_garbage_is_noted():
    text = f"0, GPU-x, {NAME}, 97887, [N/A], [Not Supported], [N/A], 00000000:01:00.0\nNVIDIA-SMI has failed\n1, 2\n"
    gpus, note = parse_gpus(text)
    assert len(gpus) == 1 and gpus[0].used_mib is None and gpus[0].util_pct is None and gpus[0].temp_c is None
    assert note is not None and "2 unreadable" in note


@given(st.text(max_size=200))
def test_parsers_never_raise_on_garbage(text):
    parse_gpus(text)
    parse_apps(text)


def test_apps_are_mapped_to_gpu_indices_by_uuid():
    gpus, _ = parse_gpus(GPUS)
    procs, note = parse_apps("4242, GPU-00000003-aaaa, 91000\n77, GPU-unknown, [N/A]\n", gpus)
    assert note is None
    assert (procs[0].pid, procs[0].gpu_index, procs[0].used_mib) == (4242, 3, 91000)
    assert procs[1].gpu_index is None and procs[1].used_mib is None


class FakeSmi:
    name = "gpu-node-1"

    def __init__(self, stream_runs, run_result=None):
        self.stream_runs = list(stream_runs)
        self.run_result = run_result

    async def run(self, argv, *, input=None, timeout_s=None):
        if self.run_result is not None:
            return self.run_result
        out = GPUS if any(a.startswith("--query-gpu") for a in argv) else "4242, GPU-00000003-aaaa, 91000\n"
        return CommandResult(tuple(argv), 0, stdout=out)

    async def stream(self, argv):
        assert "-lms" in argv
        lines, exc = self.stream_runs.pop(0)
        for line in lines:
            yield line
        if exc:
            raise exc

    async def close(self):
        pass


async def test_stream_groups_rounds_into_snapshots_and_survives_a_drop():
    rounds = GPUS.splitlines()
    src = NvidiaSmiSource(
        FakeSmi([(rounds + rounds[:2], TransportLost("gpu-node-1", "connection lost")), (rounds, None)]),
        apps_every_s=0,
    )
    got = []
    async for snap in src.stream(0.1):
        got.append(snap)
        if len(got) == 5:
            break
    first, second, lost, third = got[0], got[1], got[2], got[3]
    assert len(first.gpus) == 4 and first.processes[0].gpu_index == 3
    assert len(second.gpus) == 4 and second.error is None
    assert lost.error is not None and "connection lost" in lost.error and not lost.gpus
    assert len(third.gpus) == 4
    assert "ended" in (got[4].error or "")


async def test_missing_nvidia_smi_is_a_snapshot_error_not_a_crash():
    result = CommandResult(("nvidia-smi",), 127, stderr="sh: 1: nvidia-smi: not found")
    snap = await NvidiaSmiSource(FakeSmi([], run_result=result)).sample()
    assert snap.gpus == () and snap.error == "nvidia-smi not found on gpu-node-1"
    failed = CommandResult(
        ("nvidia-smi",),
        9,
        stderr="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    )
    snap = await NvidiaSmiSource(FakeSmi([], run_result=failed)).sample()
    assert "couldn't communicate" in (snap.error or "")
    # the same failure in the long-lived stream becomes an error snapshot too
    src = NvidiaSmiSource(FakeSmi([([], CommandFailed("gpu-node-1", failed))]))
    stream = src.stream(0.1)
    assert (await anext(stream)).gpus  # the first sample comes from a short command
    assert "couldn't communicate" in ((await anext(stream)).error or "")
    await stream.aclose()


def test_history_is_bounded_by_points_and_age():
    hist = GpuHistory(history_s=10, max_points=3)
    for t in range(6):
        hist.add(
            GpuSnapshot(taken_at=100.0 + t, gpus=(GpuSample(0, used_mib=t), GpuSample(1, used_mib=None)))
        )
    assert hist.used_mib(0) == [3, 4, 5] and hist.used_mib(1) == [] and hist.indices() == [0]
    hist.add(GpuSnapshot(taken_at=200.0, gpus=(GpuSample(0, used_mib=9),)))
    assert hist.points(0) == [(200.0, 9)]


# nvidia-smi numbers GPUs in PCI order; here index order and bus order agree, as nvidia-smi makes them.
SAMPLES = [GpuSample(i, uuid=f"GPU-{i}", pci_bus_id=f"00000000:{0x10 + i:02X}:00.0") for i in range(8)]


@pytest.mark.parametrize(
    ("env", "cuda", "expected"),
    [
        ({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, 2, 2),
        ({"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "4,5,6,7"}, 2, 6),
        ({"CUDA_VISIBLE_DEVICES": "GPU-7,GPU-3"}, 1, 3),
        ({"CUDA_VISIBLE_DEVICES": "4,5"}, 1, None),
        ({}, 2, None),
        ({"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"}, 3, None),
    ],
)
def test_cuda_index_mapping(env, cuda, expected):
    index, why = map_cuda_index(cuda, SAMPLES, env)
    assert index == expected
    assert why and ("unknown" in why or "outside" in why) == (expected is None)


def test_mapping_uses_bus_ids_not_list_order():
    shuffled = [GpuSample(0, pci_bus_id="0000:81:00.0"), GpuSample(1, pci_bus_id="00000000:01:00.0")]
    assert map_cuda_index(0, shuffled, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})[0] == 1
    assert map_cuda_index(0, [GpuSample(0)], {})[0] == 0
