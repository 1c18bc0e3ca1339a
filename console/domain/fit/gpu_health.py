"""Which GPU readings are unusual: colour by headroom against what the layout is expected to hold.

Engines that preallocate a KV pool sit at 80-95 % memory by design: SGLang takes
`--mem-fraction-static` of the memory left after start-up for weights plus the KV pool, vLLM takes
`--gpu-memory-utilization` of the whole card for everything. Absolute thresholds colour every healthy
GPU of such a layout orange (steady EP8 at 80.6 %; 79.97 % green beside 80.06 % orange). So the rule
starts from the layout's expected memory per GPU, the fit predictor's figures:

- SGLang: (capacity - start-up overhead) x mem fraction + start-up overhead
  (= weights + KV pool + CUDA context and NCCL buffers);
- vLLM: capacity x gpu-memory-utilization.

Then, per GPU:

- **ok**: at or below the expectation plus a tolerance (TOLERANCE_SHARE of the card, at least
  TOLERANCE_MIN_MIB): the layout holds what it should, whatever the percentage. Below it (loading,
  a smaller pool) is ok too.
- **warn**: above the expectation by more than the tolerance: something holds memory the layout did
  not plan for (a leaked process, a larger activation peak).
- **bad**: above the expectation and under CRITICAL_FREE_SHARE of the card free: the next allocation
  may fail.
- **idle**: a GPU the layout does not use, with under IDLE_NOISE_MIB on it.

And two anomalies, flagged in words whatever the level (at least warn):

- memory on a GPU the layout does not use (an orphaned engine, another job);
- a GPU far from its siblings: the layout's GPUs hold nearly the same (both engines fill each GPU to the
  same share), so one more than SIBLING_SHARE of the card away from their median is suspect.

Without an expectation (no model config, no fit) the absolute fallback allows the engines' own
ceilings: ok under FALLBACK_WARN_SHARE, warn under FALLBACK_BAD_SHARE, bad above.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from console.domain.fit.engine_memory import startup_overhead_bytes
from console.domain.fit.predict import FitResult
from console.domain.sizes import GIB, MIB
from console.domain.values import GpuSample

TOLERANCE_SHARE = 0.03
TOLERANCE_MIN_MIB = 2048
CRITICAL_FREE_SHARE = 0.02
IDLE_NOISE_MIB = 1024
SIBLING_SHARE = 0.10
FALLBACK_WARN_SHARE = 0.96
FALLBACK_BAD_SHARE = 0.99

OK, WARN, BAD, IDLE = "ok", "warn", "bad", "idle"


@dataclass(frozen=True, slots=True)
class GpuVerdict:
    """How one GPU's memory reads against its layout."""

    index: int
    level: str
    """ok | warn | bad | idle"""
    expected_mib: int | None = None
    anomaly: str | None = None
    """Why it is unusual, in words, or None."""


def expected_used_mib(fit: FitResult | None) -> int | None:
    """The memory one GPU of a layout is expected to hold, in MiB; None when the fit cannot say."""
    if fit is None or not fit.starts or fit.mem_fraction is None or fit.gpu_mem_gib <= 0:
        return None
    if fit.engine == "sglang":
        startup_gib = startup_overhead_bytes(fit.gpus_used) / GIB
        expected_gib = (fit.gpu_mem_gib - startup_gib) * fit.mem_fraction + startup_gib
    else:
        expected_gib = fit.gpu_mem_gib * fit.mem_fraction
    return round(expected_gib * GIB / MIB)


def judge_gpus(
    gpus: Sequence[GpuSample], *, used_indices: Collection[int] | None, expected_mib: int | None
) -> list[GpuVerdict]:
    """Each GPU's verdict, in the order given.

    Args:
        gpus: one sample of the host's GPUs.
        used_indices: the GPUs the running layout uses; empty when nothing runs (memory anywhere is
            then unexpected); None when it is unknown (no GPU is "not used by the layout", and none
            has siblings).
        expected_mib: what each of the layout's GPUs is expected to hold (expected_used_mib).
    """
    used = set(used_indices) if used_indices is not None else None
    siblings = [g.used_mib for g in gpus if used is not None and g.index in used and g.used_mib is not None]
    median = statistics.median(siblings) if len(siblings) >= 3 else None
    return [_judge(g, used, expected_mib, median) for g in gpus]


def _judge(gpu: GpuSample, used: set[int] | None, expected_mib: int | None, median: float | None) -> GpuVerdict:
    if gpu.used_mib is None or not gpu.total_mib:
        return GpuVerdict(gpu.index, IDLE)
    in_layout = used is not None and gpu.index in used
    if used is not None and not in_layout:
        if gpu.used_mib <= IDLE_NOISE_MIB:
            return GpuVerdict(gpu.index, IDLE)
        return GpuVerdict(gpu.index, WARN, anomaly=f"{_gib(gpu.used_mib)} on a GPU the layout does not use")
    expected = expected_mib if in_layout else None
    level = _level(gpu.used_mib, gpu.total_mib, expected)
    anomaly = None
    if expected is not None and level != OK:
        anomaly = f"{_gib(gpu.used_mib - expected)} more than the layout's {_gib(expected)}"
    if median is not None and abs(gpu.used_mib - median) > SIBLING_SHARE * gpu.total_mib:
        anomaly = f"{_gib(gpu.used_mib)} against its siblings' {_gib(round(median))}"
        level = WARN if level == OK else level
    return GpuVerdict(gpu.index, level, expected_mib=expected, anomaly=anomaly)


def _level(used_mib: int, total_mib: int, expected_mib: int | None) -> str:
    if expected_mib is None:
        if used_mib <= IDLE_NOISE_MIB:
            return IDLE
        share = used_mib / total_mib
        return OK if share < FALLBACK_WARN_SHARE else WARN if share < FALLBACK_BAD_SHARE else BAD
    tolerance = max(TOLERANCE_MIN_MIB, TOLERANCE_SHARE * total_mib)
    if used_mib <= expected_mib + tolerance:
        return OK
    free = total_mib - used_mib
    return BAD if free < CRITICAL_FREE_SHARE * total_mib else WARN


def _gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"
