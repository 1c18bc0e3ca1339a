"""The performance model against real figures, and explore by prediction against `explore --all`.

1. Dev set (tests/perf/dev.json, a copy of shared/perf/dev.json; split in tests/perf_dev.py: a group is
   held out when sha256(group name)[0] % 3 == 0, the story's groups stay in tuning; the coefficients were
   tuned on the tuning part only). Per part: top-1 (the measured-fastest layout by TPOT is the predicted
   fastest), top-3 in groups of 4 or more, median |TPOT error| zero-shot, and after calibrating on two
   other measured layouts of the same group (leave-one-layout-out, groups of 3 or more).
2. The story: told only "8x RTX PRO 6000 over PCIe, no P2P", TP8 < PP8 < EP8 at concurrency 1 zero-shot;
   calibrated on TP8's measured 26.3 tok/s, the errors on PP8 and EP8.
3. The demo (a simulated host like the demo's, eight layouts, loading sped up by the time scale, decode at
   the story's real pace): `explore` by prediction against `explore --all`: wall time, layouts measured,
   the layout left running. Baseline: `explore --all`.

    .venv/bin/python bench/predict.py [--skip-demo] [--time-scale 0.02]

The last line is one JSON object: top1, tpot_median_err (held-out, zero-shot), explore_speedup, and more.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from perf_dev import groups_of, held_out, load_rows, score  # noqa: E402

from console.domain.perf import Coefficients, Observation, calibrate, layout_kind  # noqa: E402

DEMO_LAYOUTS = ["TP8", "PP8", "EP8", "TP8 EP4", "TP8 EP2", "TP4 PP2", "TP2 PP4", "TP4 EP2"]
HOSTS_TOML = """\
[hosts.bench]
transport = "sim"
gpus = "sim"
time_scale = {scale}

[hosts.bench.sim]
gpu_count = 8
gpu_total_mib = 97887
gpu_name = "NVIDIA RTX PRO 6000 Blackwell Server Edition"

[hosts.bench.services.k26]
engine = "sglang"
url = "http://127.0.0.1:{port}"
mapping = "template"
template = "bench-k26@.service"
model_config = "{model}"
layouts = {layouts}
"""


def dev_scores() -> dict:
    rows, skipped = load_rows()
    k = Coefficients()
    out = {"rows_modelled": len(rows), "rows_without_config": skipped}
    for part, pick in (("tuning", False), ("held_out", True)):
        s = score([r for r in rows if held_out(r.group) == pick], k)
        out[part] = {
            "groups": s.groups,
            "top1": round(s.top1, 3),
            "top3_groups": s.top3_groups,
            "top3": round(s.top3, 3),
            "tpot_median_err": round(s.tpot_median_err, 3),
            "calibrated_groups": s.calibrated_groups,
            "tpot_median_err_calibrated": round(s.tpot_median_err_calibrated, 3),
            "worst": [[g, round(e, 3)] for g, e in s.worst],
        }
    story = {r.layout: r for r in groups_of(rows)["seed:Kimi-K2.6:8xRTX-PRO-6000-PCIe:c1"]}
    zero = {name: round(1000 / (r.terms.tpot_s(k) * 1000), 1) for name, r in story.items()}
    tp8 = story["TP8"]
    fit = calibrate(k, [Observation(tp8.terms, tp8.metric, tp8.value, layout_kind_of(tp8.layout))])
    cal = {name: round(1 / r.terms.tpot_s(fit.coefficients), 1) for name, r in story.items()}
    out["story"] = {
        "measured": {name: r.value for name, r in story.items()},
        "zero_shot": zero,
        "order_ok": zero["TP8"] < zero["PP8"] < zero["TP8 EP8"],
        "calibrated_on_tp8": cal,
        "calibrated_err": {n: round(cal[n] / story[n].value - 1, 3) for n in ("PP8", "TP8 EP8")},
    }
    return out


def layout_kind_of(name: str) -> str:
    from console.domain.layout import parse_layout

    return layout_kind(parse_layout(name))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(env: dict, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console", *args], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def one_explore(scale: float, measure_all: bool) -> dict:
    """One explore on a fresh simulated host and state dir; its time, outcomes and what it left running."""
    with tempfile.TemporaryDirectory(prefix="bench-predict-") as tmp:
        config = Path(tmp) / "hosts.toml"
        model = REPO / "console" / "sim" / "models" / "moonshotai--Kimi-K2.6.json"
        config.write_text(HOSTS_TOML.format(scale=scale, port=_free_port(), model=model,
                                            layouts=json.dumps(DEMO_LAYOUTS)))  # fmt: skip
        env = {**os.environ, "SERVE_CONSOLE_STATE_DIR": str(Path(tmp) / "state")}
        args = ["--config", str(config), "explore", "--layouts", ",".join(DEMO_LAYOUTS), "--json",
                "--concurrency", "1,8", "--output-len", "40", "--input-len", "16", "--warmup", "0"]  # fmt: skip
        if measure_all:
            args.append("--all")
        t0 = time.monotonic()
        done = _cli(env, *args)
        wall = time.monotonic() - t0
        try:
            final = json.loads(done.stdout.strip().splitlines()[-1])
        finally:
            _cli(env, "--config", str(config), "stop", timeout=300)
        if final.get("event") != "explore":
            raise SystemExit(f"explore failed: {done.stderr.strip()[-400:]}")
        outcomes = {lay["layout"]: lay["outcome"] for lay in final["layouts"]}
        return {"wall_s": round(wall, 1), "measured": sum(o == "measured" for o in outcomes.values()),
                "outcomes": outcomes, "best": final["best"], "left_running": final["left_running"],
                "order": [lay["layout"] for lay in final["layouts"]]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-demo", action="store_true", help="only the dev-set scores")
    parser.add_argument("--time-scale", type=float, default=0.02, help="the simulated host's start-up pace")
    args = parser.parse_args()
    scores = dev_scores()
    print(json.dumps(scores, indent=1))
    summary = {
        "top1": scores["held_out"]["top1"],
        "top3": scores["held_out"]["top3"],
        "tpot_median_err": scores["held_out"]["tpot_median_err"],
        "tpot_median_err_calibrated": scores["held_out"]["tpot_median_err_calibrated"],
        "story_order_ok": scores["story"]["order_ok"],
        "explore_speedup": None,
    }
    if not args.skip_demo:
        pred = one_explore(args.time_scale, measure_all=False)
        every = one_explore(args.time_scale, measure_all=True)
        print(json.dumps({"explore_by_prediction": pred, "explore_all": every}, indent=1))
        print(f"explore by prediction: {pred['wall_s']} s, {pred['measured']} of {len(DEMO_LAYOUTS)} measured, "
              f"left {pred['left_running']}; explore --all: {every['wall_s']} s, left {every['left_running']}; "
              f"{every['wall_s'] / pred['wall_s']:.2f}x")  # fmt: skip
        summary.update(explore_speedup=round(every["wall_s"] / pred["wall_s"], 2),
                       explore_measured=pred["measured"], explore_layouts=len(DEMO_LAYOUTS),
                       explore_left=pred["left_running"], explore_all_best=every["best"])  # fmt: skip
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
