"""`serve-console fit`: table, JSON, exit codes and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.cli import main

MODELS = Path(__file__).resolve().parents[1] / "models"
KIMI = str(MODELS / "moonshotai--Kimi-K2.6.json")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["fit", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_for_the_seed_oom(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "--model-config", KIMI, "--layout", "TP4 EP2", "--gpu-mem-gib", "94.97", "--json"
    )
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == 1
    data = json.loads(lines[0])
    assert data["layout"] == "TP4 EP2"
    assert data["engine"] == "sglang"
    assert data["gpus_used"] == 4
    assert data["verdict"] == "oom"
    assert 138 < data["weights_gib_per_gpu"] < 144
    assert {"overhead_gib", "headroom_gib", "reason"} <= data.keys()


def test_table_for_the_layouts_that_fit(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "--model-config", KIMI, "--layout", "TP8", "--layout", "EP8", "--layout", "PP8",
        "--gpu-mem-gib", "94.97", "--gpus", "8",
    )  # fmt: skip
    assert code == 0
    assert "weights/GPU" in out and "KV headroom" in out
    rows = [line for line in out.splitlines() if line.startswith(("TP8 ", "PP8 "))]
    assert len(rows) == 3 and all(row.rstrip().endswith("fits") for row in rows)


def test_invalid_layout_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    qwen = str(MODELS / "Qwen--Qwen3-235B-A22B-FP8.json")
    code, out, _ = run(capsys, "--model-config", qwen, "--layout", "TP8", "--gpu-mem-gib", "94.97", "--json")
    assert code == 1
    data = json.loads(out)
    assert data["verdict"] == "invalid" and "block_n = 128" in data["reason"]


def test_vllm_engine_and_mem_fraction(capsys: pytest.CaptureFixture[str]) -> None:
    llama = str(MODELS / "meta-llama--Llama-3.1-8B-Instruct.json")
    code, out, _ = run(
        capsys, "--model-config", llama, "--layout", "TP1", "--gpu-mem-gib", "79.19", "--engine", "vllm",
        "--mem-fraction", "0.5", "--json",
    )  # fmt: skip
    data = json.loads(out)
    assert code == 0
    assert data["engine"] == "vllm" and data["weights_gib_per_gpu"] == 14.96 and data["mem_fraction"] == 0.5


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--model-config", "/nonexistent/config.json", "--layout", "TP8"], "no such model config"),
        (["--model-config", str(MODELS / "SOURCES.md"), "--layout", "TP8"], "not valid JSON"),
        (["--model-config", KIMI, "--layout", "TP4 EPx"], "--layout 'TP4 EPx'"),
        (["--model-config", KIMI, "--layout", "TP8", "--mem-fraction", "1.5"], "--mem-fraction"),
        (["--model-config", KIMI, "--layout", "TP8", "--gpus", "0"], "--gpus"),
    ],
)
def test_usage_errors_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    code, out, err = run(capsys, *args, "--gpu-mem-gib", "94.97")
    assert code == 2
    assert out == ""
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_bad_gpu_memory_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--model-config", KIMI, "--layout", "TP8", "--gpu-mem-gib", "-1")
    assert code == 2 and "--gpu-mem-gib must be positive" in err
