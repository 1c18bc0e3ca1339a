"""The probe's human summary: the server's text (its model id, its errors) reaches the terminal inert, and a
level whose streams came whole says so (issue 18, B10; the probe printed the model name raw)."""

from __future__ import annotations

from console.commands.probe_output import summary_lines
from console.ops.explore.probe_metrics import ProbeResult, RequestResult, summarize

HOSTILE_MODEL = "evil\x1b]52;c;aGVsbG8=\x07\x1b[2J\u202emodel\r\n[red]x[/]"


def _result(*requests: RequestResult) -> ProbeResult:
    return ProbeResult(host="gpu-node-1", service="kimi-k2.6", layout="EP8", engine="sglang", model=HOSTILE_MODEL,
                       summary=summarize(list(requests), 1.0, concurrency=1), taken_at=0.0)


def test_the_model_id_and_errors_from_the_server_print_without_control_characters() -> None:
    failed = RequestResult(ok=False, prompt_tokens=4, e2e_s=0.1, error="HTTP 500: \x1b[31mboom\x9b2J")
    lines = summary_lines(_result(failed))
    text = "\n".join(lines)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c == "\u202e" for line in lines for c in line)
    model_row = next(line for line in lines if line.startswith("Model:"))
    assert "evil" in model_row and "model" in model_row and "[red]x[/]" in model_row  # words kept, codes gone
    assert "boom" in text


def test_a_level_whose_streams_came_in_one_read_says_so() -> None:
    whole = RequestResult(ok=True, prompt_tokens=4, output_tokens=8, ttft_s=0.09, itl_s=(0.0,) * 7, e2e_s=0.09)
    paced = RequestResult(ok=True, prompt_tokens=4, output_tokens=8, ttft_s=0.01, itl_s=(0.002,) * 7, e2e_s=0.03)
    said = [line for line in summary_lines(_result(whole, paced)) if "in one read" in line]
    assert said == ["(1 of 2 streams came in one read: this machine kept the client from reading as they "
                    "streamed; their TTFT and TPOT are not the engine's)"]
    assert not [line for line in summary_lines(_result(paced)) if "in one read" in line]
