"""Benchmark of the journal pane's per-line cleaning: redaction plus the one sanitiser (issue 10).

Baseline: the pane's previous `clean_text` (C0 controls to U+FFFD, no C1, bidi or secrets), copied
here. Measured on the lines bench/tui.py feeds the pane, plus one hostile and one secret-bearing line.
Prints microseconds per line for each, the ratio new / baseline, and one JSON line at the end.

Run: .venv/bin/python bench/sanitise.py
"""

from __future__ import annotations

import json
import re
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.ui.widgets.journal_lines import clean_text

_OLD_CONTROL = re.compile("[\u0000-\u0008\u000b-\u001f\u007f]")


def baseline_clean_text(text: str, max_chars: int = 4000) -> str:
    if text.isprintable() and len(text) <= max_chars:
        return text
    if len(text) > max_chars:
        text = text[:max_chars] + f" … [{len(text) - max_chars} more chars]"
    return _OLD_CONTROL.sub("\ufffd", text.expandtabs())


LINES = {
    "decode": "[2026-05-26 00:06:20 TP3 EP3] Decode batch. #running-req: 12, #token: 40961, token usage: 0.41, "
    "gen throughput (token/s): 812.33, #queue-req: 0, n=7",
    "access": '[2026-05-26 00:06:20] INFO:     127.0.0.1:40312 - "POST /v1/chat/completions HTTP/1.1" 200 OK n=7',
    "nccl": "[2026-05-26 00:06:21 TP3] NCCL WARN Call to bind failed: Address already in use n=7",
    "hostile": "boom \x1b]52;c;ZWNobyBoaQ==\x07\x1b[2J \u009b2J \u202eevil\u202c",
    "secret": "server_args=ServerArgs(model_path='/models/k26', api_key='sk-live-123', port=30000)",
}


def per_line_us(fn, text: str, number: int = 50_000) -> float:
    return min(timeit.repeat(lambda: fn(text), number=number, repeat=3)) / number * 1e6


def main() -> None:
    results = {}
    for name, text in LINES.items():
        old, new = per_line_us(baseline_clean_text, text), per_line_us(clean_text, text)
        results[name] = {"baseline_us": round(old, 3), "new_us": round(new, 3), "ratio": round(new / old, 2)}
        print(f"{name:<8} baseline {old:6.2f} us/line   new {new:6.2f} us/line   ratio {new / old:5.2f}x")
    ordinary = [results[k]["new_us"] for k in ("decode", "access", "nccl")]
    worst = max(ordinary)
    print(f"ordinary lines: at most {worst:.2f} us/line, {20_000 * worst / 1e4:.1f}% of one core at 20,000 lines/s")
    print(json.dumps({"bench": "sanitise", "baseline": "previous clean_text", "lines": results,
                      "ordinary_max_us": worst}))


if __name__ == "__main__":
    main()
