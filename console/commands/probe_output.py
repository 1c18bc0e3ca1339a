"""A probe level printed in sglang.bench_serving's layout (names padded to 40 columns, sections of 50)."""

from __future__ import annotations

from console.domain.safe_text import shown
from console.ops.explore import ProbeResult


def _section(title: str) -> str:
    return f"{title:-^50}"


def _row(name: str, value: object) -> str:
    if value is None:
        text = "n/a"
    elif isinstance(value, float):
        text = f"{value:.2f}"
    else:
        text = str(value)
    return f"{name + ':':<40} {text:<10}".rstrip()


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.2f}"


def summary_lines(result: ProbeResult) -> list[str]:
    """bench_serving's summary, with vLLM's failed count and TPOT section, for one level; every line made
    printable and redacted, as all host text is."""
    s = result.summary
    rate = "inf" if s.request_rate is None else f"{s.request_rate:g}"
    lines = [
        f"{' Serving Benchmark Result ':=^50}",
        _row("Host / service", f"{result.host}/{result.service}"),
        _row("Layout", result.layout or "?"),
        _row("Backend", result.engine),
        _row("Model", result.model),
        _row("Traffic request rate", rate),
        _row("Max request concurrency", s.concurrency if s.concurrency is not None else "not set"),
        _row("Successful requests", s.completed),
        _row("Failed requests", s.failed),
        _row("Benchmark duration (s)", s.duration_s),
        _row("Total input tokens", s.total_input_tokens),
        _row("Total generated tokens", s.total_output_tokens),
        _row("Generated tokens counted from", s.tokens_from),
        _row("Request throughput (req/s)", s.request_throughput),
        _row("Input token throughput (tok/s)", s.total_input_tokens / s.duration_s if s.duration_s else 0.0),
        _row("Output token throughput (tok/s)", s.output_throughput),
        _row("Total token throughput (tok/s)", s.total_token_throughput),
        _row("Concurrency", s.mean_concurrency),
        _section("End-to-End Latency"),
        _row("Mean E2E Latency (ms)", s.e2el.mean_ms),
        _row("Median E2E Latency (ms)", s.e2el.median_ms),
        _section("Time to First Token"),
        _row("Mean TTFT (ms)", s.ttft.mean_ms),
        _row("Median TTFT (ms)", s.ttft.median_ms),
        _row("P99 TTFT (ms)", s.ttft.p99_ms),
        _section("Time per Output Token (excl. 1st token)"),
        _row("Mean TPOT (ms)", s.tpot.mean_ms),
        _row("Median TPOT (ms)", s.tpot.median_ms),
        _row("P99 TPOT (ms)", s.tpot.p99_ms),
        _section("Inter-Token Latency"),
        _row("Mean ITL (ms)", s.itl.mean_ms),
        _row("Median ITL (ms)", s.itl.median_ms),
        _row("P95 ITL (ms)", s.itl.p95_ms),
        _row("P99 ITL (ms)", s.itl.p99_ms),
        _row("Max ITL (ms)", s.itl.max_ms),
    ]
    view = result.engine_view
    if view is not None:  # the engine's own histograms and counters over the same level
        lines += [
            _section("Engine's own view (/metrics)"),
            _row("Engine generation throughput (tok/s)", view.generation_tokens_per_s),
            _row("Engine P50 / P99 TTFT (ms)", f"{_ms(view.ttft_p50_s)} / {_ms(view.ttft_p99_s)}"),
            _row("Engine P50 / P99 ITL (ms)", f"{_ms(view.itl_p50_s)} / {_ms(view.itl_p99_s)}"),
        ]
    if s.truncated:
        lines.append("(--max-duration ended this level early; requests still running were dropped)")
    if s.whole_streams:
        lines.append(f"({s.whole_streams} of {s.completed} streams came in one read: this machine kept the client "
                     "from reading as they streamed; their TTFT and TPOT are not the engine's)")
    lines += [f"failed: {e}" for e in s.errors]
    if s.why:
        lines.append(f"FAILED level, stored failed: {s.why}")
    lines.append("=" * 50)
    return [shown(line) for line in lines]  # the model id and the errors are the server's text
