"""GPU colours that mean unusual: the layout's expected memory is normal, headroom against it is the colour."""

from __future__ import annotations

import pytest

from console.config import demo_config_path, load_config
from console.domain.fit.gpu_health import BAD, IDLE, OK, WARN, expected_used_mib, judge_gpus
from console.domain.values import GpuSample
from console.ops.fit_check import fit_layout, gpu_capacity

TOTAL = 97887  # MiB, the demo's RTX PRO 6000


def gpus(*used: int, total: int = TOTAL) -> list[GpuSample]:
    return [GpuSample(index=i, used_mib=u, total_mib=total) for i, u in enumerate(used)]


def demo_expected(host: str, layout: str) -> int:
    config = load_config(demo_config_path())
    host_cfg = config.host(host)
    service = host_cfg.services[0]
    return expected_used_mib(fit_layout(service, service.layout(layout), gpu_capacity(host_cfg)))


def test_the_layouts_expected_memory_is_what_sglang_and_vllm_reserve():
    ep8 = demo_expected("demo", "EP8")  # SGLang, mem fraction 0.806 of 94.97 GiB after start-up
    assert 76 * 1024 < ep8 < 78 * 1024
    vllm_tp4 = demo_expected("demo-vllm", "TP4")  # vLLM, 0.9 of the card
    assert vllm_tp4 == pytest.approx(0.9 * 79.13 * 1024, rel=0.01)
    assert demo_expected("demo", "TP4 EP2") is None  # predicted oom: no expectation to hold


def test_steady_ep8_at_80_percent_is_all_ok():
    expected = demo_expected("demo", "EP8")
    steady = round(0.806 * TOTAL)  # what the issue saw: all eight orange
    verdicts = judge_gpus(gpus(*[steady] * 8), used_indices=range(8), expected_mib=expected)
    assert [v.level for v in verdicts] == [OK] * 8 and all(v.anomaly is None for v in verdicts)


def test_no_edge_between_79_97_and_80_06_percent():
    expected = demo_expected("demo", "EP8")
    a, b = round(0.7997 * TOTAL), round(0.8006 * TOTAL)
    assert {v.level for v in judge_gpus(gpus(a, b, a, b), used_indices=range(4), expected_mib=expected)} == {OK}


def test_headroom_against_the_expectation_colours():
    expected = 70_000
    verdicts = judge_gpus(gpus(70_000 + 2_000, 70_000 + 6_000, TOTAL - 500), used_indices=range(3),
                          expected_mib=expected)
    assert [v.level for v in verdicts] == [OK, WARN, BAD]
    assert verdicts[1].anomaly == "5.9 GiB more than the layout's 68.4 GiB"
    loading = judge_gpus(gpus(30_000, 30_500, 29_800), used_indices=range(3), expected_mib=expected)
    assert [v.level for v in loading] == [OK] * 3  # below the expectation while weights load


def test_memory_on_a_gpu_the_layout_does_not_use_is_flagged():
    verdicts = judge_gpus(gpus(70_000, 70_000, 300, 20_000), used_indices={0, 1}, expected_mib=72_000)
    assert [v.level for v in verdicts] == [OK, OK, IDLE, WARN]
    assert verdicts[3].anomaly == "19.5 GiB on a GPU the layout does not use"
    nothing_runs = judge_gpus(gpus(0, 5_000), used_indices=(), expected_mib=None)
    assert [v.level for v in nothing_runs] == [IDLE, WARN]


def test_a_gpu_far_from_its_siblings_is_flagged():
    verdicts = judge_gpus(gpus(*[78_000] * 7, 60_000), used_indices=range(8), expected_mib=78_800)
    assert [v.level for v in verdicts[:7]] == [OK] * 7
    assert verdicts[7].level == WARN and "siblings" in verdicts[7].anomaly


def test_without_an_expectation_the_engines_ceilings_are_allowed():
    verdicts = judge_gpus(gpus(round(0.93 * TOTAL), round(0.975 * TOTAL), round(0.995 * TOTAL), 10),
                          used_indices=None, expected_mib=None)
    assert [v.level for v in verdicts] == [OK, WARN, BAD, IDLE]


def test_a_gpu_without_readings_is_idle():
    assert judge_gpus([GpuSample(index=0)], used_indices=None, expected_mib=None)[0].level == IDLE
