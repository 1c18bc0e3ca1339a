"""`serve-console predict`: JSON lines, layouts that do not fit, calibration by hand, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.cli import main

MODELS = Path(__file__).resolve().parents[1] / "models"
KIMI = str(MODELS / "moonshotai--Kimi-K2.6.json")
STORY = ["--model-config", KIMI, "--gpu", "RTX-PRO-6000", "--gpus", "8", "--engine", "sglang"]
KEYS = {
    "layout",
    "concurrency",
    "ttft_ms",
    "tpot_ms",
    "output_tok_s",
    "per_request_tok_s",
    "range",
    "calibrated",
    "verdict",
}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["predict", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_line_per_layout_and_concurrency(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        *STORY,
        "--layout",
        "TP8",
        "--layout",
        "PP8",
        "--layout",
        "EP8",
        "--concurrency",
        "1,32",
        "--json",
    )
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 6
    for row in rows:
        assert KEYS <= row.keys()
        assert row["range"]["low"] < row["output_tok_s"] < row["range"]["high"]
        assert row["calibrated"] is False
        assert row["verdict"] == "fits"
    first = [r["layout"] for r in rows if r["concurrency"] == 1]
    assert first[0] == "TP8 EP8" and first[-1] == "TP8"  # fastest first


def test_a_layout_that_does_not_fit_is_reported_never_ranked(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *STORY, "--layout", "TP4 EP2", "--layout", "TP8", "--json")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["layout"] for r in rows] == ["TP8", "TP4 EP2"]
    assert rows[1]["verdict"] == "oom"
    assert rows[1]["output_tok_s"] is None and rows[1]["range"] is None


def test_measured_figures_calibrate_and_narrow_the_range(capsys: pytest.CaptureFixture[str]) -> None:
    _, before, _ = run(capsys, *STORY, "--layout", "TP8", "--json")
    _, after, _ = run(
        capsys, *STORY, "--layout", "TP8", "--measured", "TP8,1,per_request_tok_s=26.3", "--json"
    )
    zero, fitted = json.loads(before), json.loads(after)
    assert fitted["calibrated"] is True
    assert abs(fitted["per_request_tok_s"] - 26.3) < abs(zero["per_request_tok_s"] - 26.3)
    width = lambda row: row["range"]["high"] / row["range"]["low"]  # noqa: E731
    assert width(fitted) < width(zero)


def test_the_table_names_each_layout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *STORY, "--layout", "TP8", "--layout", "TP4 EP2")
    assert code == 0
    assert "TPOT ms" in out.splitlines()[0]
    assert "oom" in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--gpu", "GTX-1080"], "hardware.json: no figures for GPU 'GTX-1080'"),
        (["--measured", "TP8,one,tpot_ms=3"], "--measured 'TP8,one,tpot_ms=3'"),
        (["--measured", "TP8,1,speed=3"], "METRIC must be one of"),
        (["--concurrency", "0"], "--concurrency '0'"),
        (["--layout", "TP0"], "--layout 'TP0'"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    base = [*STORY, "--layout", "TP8"]
    if args[0] == "--gpu":
        base[base.index("--gpu") + 1] = args[1]
        args = []
    code = main(["predict", *base, *args])
    _, err = capsys.readouterr()
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1


def test_without_host_the_model_and_gpus_are_required(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["predict", "--model-config", KIMI, "--layout", "TP8"])
    _, err = capsys.readouterr()
    assert code == 2
    assert "--gpu is required without --host" in err and len(err.strip().splitlines()) == 1
