"""How soon does the switch know, in each case the tests check? The figures the tests no longer assert.

The tests (tests/sim/test_switch.py and their neighbours) assert what a switch found: its verdict, its
cause, the rollback. How soon it found it is this benchmark's figure, for the same cases on the same
simulated hosts (tests/sim_fixtures.py, time scale 0.03): each injected failure, EP8 ready, the forced
OOM and its rollback, a journal that lags, one that stores systemd's exit line first, a death the journal
does not explain (the state's verdict after the journal grace), the simulated vLLM's OOM, a real vLLM's
max-model-len lines, `demo --nodes` naming a dead node, and a stop after a full disk.

Each case runs `--rounds` times; it reports the median and max `detected_after_s` against the limit the
test used to assert (the target) and against the operator's 15 s loop, whose verdict falls uniformly over its
period (expected 7.5 s; bench/detect_latency.py measures that loop itself). The last line is one JSON
object.

    .venv/bin/python bench/verdict_cases.py [--rounds 3] [--case NAME ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from journal_fakes import LaggingJournal, NoJournal, SystemdLineFirst  # noqa: E402
from sim_fixtures import EP8, SimHosts, failing, fake_engine, free_port, qwen_host  # noqa: E402

from console.cli import interrupt_on_termination  # noqa: E402
from console.ops.switch.orchestrate import switch_layout  # noqa: E402
from console.ops.switch.start_follow import JOURNAL_GRACE_S  # noqa: E402

SEED_LOOP_MEDIAN_S = 7.5  # a 15 s loop's verdict, uniform over its period
REAL = REPO / "tests" / "fixtures" / "vllm-real"
Case = Callable[[SimHosts, pytest.MonkeyPatch, Path], Awaitable[dict[str, float]]]


def injected(kind: str) -> Case:
    async def run(hosts, _mp, _tmp):
        host = hosts(layout_specs=(failing("BAD", kind),))
        result = await switch_layout(host, None, "BAD", rollback=False, timeout_s=60)
        assert result.outcome == "failed", result.reason
        return {"failure": result.detected_after_s}
    return run


async def ep8_ready(hosts, _mp, _tmp):
    result = await switch_layout(hosts(), None, "EP8", timeout_s=60)
    assert result.outcome == "ready", result.reason
    return {"ready": result.detected_after_s}


async def forced_oom(hosts, _mp, _tmp):
    host = hosts()
    assert (await switch_layout(host, None, "EP8", timeout_s=60)).outcome == "ready"
    result = await switch_layout(host, None, "TP4EP2", force=True, timeout_s=60)
    assert result.outcome == "failed" and result.rollback is not None, result.reason
    return {"failure": result.detected_after_s, "rollback ready": result.rollback.detected_after_s}


def oom_through(wrap: Callable) -> Case:
    async def run(hosts, _mp, _tmp):
        host = hosts()
        host.services = wrap(host.services)
        result = await switch_layout(host, None, "TP4EP2", force=True, rollback=False, timeout_s=60,
                                     state_poll_s=0.05)  # fmt: skip
        assert result.outcome == "failed", result.reason
        return {"failure": result.detected_after_s}
    return run


async def death_without_journal(hosts, mp, _tmp):
    fake_engine(mp, "import time, sys\ntime.sleep(0.3)\nsys.exit(3)\n")
    host = hosts()
    host.services = NoJournal(host.services)
    result = await switch_layout(host, None, "EP8", rollback=False, timeout_s=30, state_poll_s=0.05)
    assert result.outcome == "failed", result.reason
    return {"failure": result.detected_after_s}


async def vllm_oom(hosts, _mp, _tmp):
    host = hosts(qwen_host(free_port()))
    assert (await switch_layout(host, None, "TP4", timeout_s=60)).outcome == "ready"
    result = await switch_layout(host, None, "TP2", force=True, timeout_s=60)
    assert result.outcome == "failed", result.reason
    return {"failure": result.detected_after_s}


async def real_vllm_max_model_len(hosts, mp, tmp):
    lines = (REAL / "max-model-len.log").read_text().splitlines()
    printed = tmp / "printed.log"
    printed.write_text("\n".join(lines[: next(i for i, x in enumerate(lines) if "For further information" in x) + 1]))
    fake_engine(mp, f"import sys, time\nprint(open({str(printed)!r}).read(), flush=True)\ntime.sleep(8)\nsys.exit(1)\n")
    host = hosts(qwen_host(free_port()))
    result = await switch_layout(host, None, "TP4", rollback=False, timeout_s=30, state_poll_s=0.05)
    assert result.outcome == "failed", result.reason
    return {"failure": result.detected_after_s}


async def demo_nodes_dead(_hosts, _mp, tmp):
    (tmp / "tmp").mkdir()
    env = dict(os.environ, TMPDIR=str(tmp / "tmp"), SERVE_CONSOLE_PORT_LOCK_DIR=str(tmp / "locks"))
    env.pop("SERVE_CONSOLE_STATE_DIR", None)
    run = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "console", "demo", "--nodes", "--json",
                                  "--time-scale", "0.03"], cwd=REPO, env=env, capture_output=True, text=True,
                                  timeout=180)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    verdict = json.loads(run.stdout.splitlines()[-1])
    assert verdict["event"] == "verdict" and verdict["group"] == "dead", verdict
    return {"dead node": verdict["after_s"]}


async def stop_after_full_disk(hosts, mp, _tmp):
    fake_engine(mp, "import time\nwhile True:\n    print('Load weight begin. avail mem=94.00 GB', flush=True)\n"
                    "    time.sleep(0.05)\n")  # fmt: skip
    host = hosts(layout_specs=(EP8,))
    unit = host.config.services[0].unit_for(host.config.services[0].layouts[0])
    await host.services.start(unit)
    journal = host.services.unit_dir(unit) / "journal.jsonl"
    while not (await host.services.state(unit)).is_running:  # noqa: ASYNC110 (another process)
        await asyncio.sleep(0.02)
    journal.unlink()
    journal.symlink_to("/dev/full")
    while (await host.services.state(unit)).active != "failed":  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    journal.unlink()
    started = time.monotonic()
    await host.services.stop(unit)
    return {"stop": time.monotonic() - started}


#: name -> (the case, the limit its test asserted, the test)
CASES: dict[str, tuple[Case, float, str]] = {
    **{f"injected-{k}": (injected(k), 1.0, "test_switch.py::test_each_injected_failure_is_reported_with_its_triaged_cause")
       for k in ("nccl", "port", "kv", "cuda_graph")},
    "ep8-ready": (ep8_ready, 1.0, "test_switch.py::test_forced_oom_fails_with_the_oom_facts_and_rolls_back_to_the_last_ready_layout"),
    "forced-oom": (forced_oom, 1.0, "test_switch.py::test_forced_oom_fails_with_the_oom_facts_and_rolls_back_to_the_last_ready_layout, "
                   "test_cli_headless.py::test_forced_tp4ep2_fails_with_oom_facts_then_rolls_back_to_ep8"),
    "lagging-journal-oom": (oom_through(lambda s: LaggingJournal(s, lag_s=0.6)), 1.0,
                            "test_switch.py::test_a_lagging_journal_still_names_the_oom_the_unit_state_saw_first"),
    "systemd-line-first-oom": (oom_through(SystemdLineFirst), 1.0,
                               "test_switch.py::test_the_oom_is_named_even_when_systemds_exit_line_comes_first"),
    "death-without-journal": (death_without_journal, JOURNAL_GRACE_S + 0.5,
                              "test_switch.py::test_a_death_the_journal_does_not_explain_is_failed_from_the_unit_state"),
    "sim-vllm-oom": (vllm_oom, 1.0, "test_sim_vllm.py::test_the_vllm_story_tp4_serves_tp2_forced_ooms_and_rolls_back"),
    "real-vllm-max-model-len": (real_vllm_max_model_len, 2.0, "test_real_vllm_lines.py::test_a_cause_under_a_validation_error_is_named_though_the_process_exits_seconds_later"),
    "demo-nodes-dead": (demo_nodes_dead, 2.0, "test_demo_story.py::test_the_two_host_story_names_the_dead_worker_while_the_head_answers_200"),
    "stop-after-full-disk": (stop_after_full_disk, 5.0, "test_supervisor_enospc.py::test_a_full_disk_under_the_journal_fails_the_unit_with_result_resources"),
}  # fmt: skip


async def one(case: Case) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="verdict-cases-") as tmp, pytest.MonkeyPatch.context() as mp:
        hosts = SimHosts(Path(tmp))
        try:
            return await case(hosts, mp, Path(tmp))
        finally:
            await hosts.close()


async def main(rounds: int, names: list[str]) -> dict:
    out: dict = {"rounds": rounds, "baseline": "seed 15 s loop, expected median 7.5 s", "cases": {}}
    for name in names:
        case, limit, test = CASES[name]
        seen: dict[str, list[float]] = {}
        for _ in range(rounds):
            for figure, value in (await one(case)).items():
                seen.setdefault(figure, []).append(value)
        for figure, values in seen.items():
            median = statistics.median(values)
            row = {"median_s": round(median, 3), "max_s": round(max(values), 3), "target_s": limit,
                   "within_target": max(values) < limit, "test": test,
                   "ratio_vs_seed_loop": round(SEED_LOOP_MEDIAN_S / median, 1) if median > 0 else None}
            out["cases"][f"{name}: {figure}"] = row
            print(f"{name + ': ' + figure:42} median {median:6.3f} s  max {max(values):6.3f} s  target < {limit:g} s"
                  f"  {'ok' if row['within_target'] else 'OVER'}  seed loop / this: {row['ratio_vs_seed_loop']}x",
                  flush=True)  # fmt: skip
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each case (default 3)")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="only these cases (repeatable)")
    args = parser.parse_args()
    interrupt_on_termination()
    try:
        print(json.dumps(asyncio.run(main(args.rounds, args.case or list(CASES)))))
    except KeyboardInterrupt:
        sys.exit(130)
