"""`serve-console triage`: files, stdin, JSON lines, exit codes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from console.cli import main

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
MIB = 1 << 20


def _stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_clean_start_says_so_in_one_line_and_exits_0(capsys):
    assert main(["triage", str(LOGS / "sglang_tp8_ready.log")]) == 0
    assert capsys.readouterr().out == "no findings in 92 lines\n"
    assert main(["triage", "--json", str(LOGS / "vllm_tp4_ready.log")]) == 0
    assert capsys.readouterr().out == ""


def test_seed_oom_as_json(capsys):
    assert main(["triage", "--json", str(LOGS / "sglang_tp4ep2_oom.log")]) == 1
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["class"] for r in rows] == ["cuda_oom", "cuda_oom", "engine_init", "unit_failed", "unit_failed"]
    assert [r["decisive"] for r in rows] == [True, False, False, False, False]
    first = rows[0]
    assert first["rank"] == "TP2 EP1" and first["gpu"] == 2 and first["line_no"] == 32
    assert first["hint"].startswith("the GPU ran out of memory while the weights were loading")  # issue 30 B4
    assert [c["class"] for c in first["consequences"]] == ["cuda_oom", "engine_init", "unit_failed", "unit_failed"]
    assert first["tried_bytes"] == 672 * MIB
    assert first["free_bytes"] == round(136.94 * MIB)
    assert first["total_bytes"] == round(94.97 * (1 << 30))
    assert first["in_use_bytes"] == round(94.83 * (1 << 30))
    assert "Tried to allocate 672.00 MiB" in first["line"]


def test_human_lines_have_class_rank_summary(capsys):
    assert main(["triage", "--engine", "sglang", str(LOGS / "sglang_tp4ep2_oom.log")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["cuda_oom", "TP2"]  # the decisive finding first
    assert "CUDA OOM on GPU 2 (TP2 EP1): tried 672.00 MiB with 136.94 MiB free of 94.97 GiB" in lines[0]
    assert lines[0].endswith("(line 32, loading_weights)")
    assert lines[1].startswith("  what to do: the GPU ran out of memory while the weights were loading")  # B4
    assert lines[2].startswith("  which explains: cuda_oom (line 51, loading_weights), engine_init (line 53")
    assert lines[3] == "all findings:"
    assert len(lines) == 4 + 5
    assert lines[7].startswith("unit_failed") and " - " in lines[7]


def test_the_hint_names_what_to_do(tmp_path, capsys):
    log = tmp_path / "k.log"
    log.write_text("(EngineCore_DP0 pid=9) ERROR 07-28 15:07:22 [core.py:632] torch.AcceleratorError: CUDA error: "
                   "no kernel image is available for execution on the device (sm_120)\n")
    assert main(["triage", str(log)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("no_kernel_image       DP0")
    assert out[1] == "  what to do: this build has no kernels for this GPU (sm_120); use a build for it"


def test_a_terminal_on_stdin_gets_the_usage_not_a_hang(monkeypatch, capsys):
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    assert main(["triage"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage:") and "pipe one in" in err


def test_stdin_with_invalid_utf8_and_crlf(monkeypatch, capsys):
    data = (
        b"\xff\xfe garbage \xc3\x28\r\n"
        b"[2026-05-26 00:08:52] ERROR:    [Errno 98] error while attempting to bind on address "
        b"('0.0.0.0', 30000): address already in use\r\n"
    )
    _stdin(monkeypatch, data)
    assert main(["triage", "--json", "-"]) == 1
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["class"] == "port_in_use" and row["line"].endswith("address already in use")


def test_stdin_is_the_default(monkeypatch, capsys):
    _stdin(monkeypatch, b"nothing to see\n")
    assert main(["triage"]) == 0
    assert capsys.readouterr().out == "no findings in 1 lines\n"


def test_tqdm_carriage_returns_are_split(monkeypatch, capsys):
    data = b"Loading safetensors checkpoint shards:   0% Completed | 0/2\rRuntimeError: CUDA error: out of memory\n"
    _stdin(monkeypatch, data)
    assert main(["triage", "--json"]) == 1
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["class"] == "cuda_oom" and row["line"] == "RuntimeError: CUDA error: out of memory"


def test_unreadable_file_is_one_line_exit_2(tmp_path, capsys):
    missing = tmp_path / "nope.log"
    assert main(["triage", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(missing) in err and "Traceback" not in err
    assert main(["triage", str(tmp_path)]) == 2  # a directory
    assert str(tmp_path) in capsys.readouterr().err


def test_bad_engine_is_a_usage_error(capsys):
    assert _exit_code(lambda: main(["triage", "--engine", "tgi", "x.log"])) == 2


def _exit_code(call) -> int:
    try:
        return call()
    except SystemExit as exc:
        return int(exc.code)


def test_piped_through_the_real_entry_point(tmp_path):
    log = (LOGS / "vllm_ep_oom.log").read_bytes() + b"\x80\x81 broken utf-8 line\n"
    proc = subprocess.run(
        [sys.executable, "-m", "console", "triage", "--json", "-"],
        input=log,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    classes = [json.loads(line)["class"] for line in proc.stdout.decode().splitlines()]
    assert classes == ["cuda_oom", "cuda_oom", "engine_init", "engine_init"]
    assert proc.stderr == b""
