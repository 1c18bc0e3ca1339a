"""Issue 30 C10: `serve-console tail ... | serve-console triage` reads as journalctl's output does: the ranks
and the split between starts survive tail's own `HH:MM:SS.mmm UNIT: ` prefix, and tail's `>> class: summary`
marks (its own findings) are not read as log text. An empty input is an error, in one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from console.cli import main

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
_JOURNAL = re.compile(r"[A-Z][a-z]{2} [ \d]\d (?P<clock>\d\d:\d\d:\d\d) \S+ (?P<ident>[^\s\[]+)(?:\[\d+\])?: (?P<msg>.*)")


def _as_tail(journal: str, unit: str) -> str:
    """The journal as `serve-console tail` prints it: `HH:MM:SS.mmm UNIT: MESSAGE` (commands/tail.py)."""
    out = []
    for line in journal.splitlines():
        m = _JOURNAL.match(line)
        assert m, line
        out.append(f"{m['clock']}.000 {unit}: {m['msg']}")
        if "OutOfMemoryError" in line:  # tail marks what triage found on a line
            out.append(">> cuda_oom TP2 EP1: CUDA OOM on GPU 2 (TP2 EP1): NCCL error: unhandled system error")
    return "\n".join(out) + "\n"


def _rows(path: Path, capsys) -> list[tuple]:
    code = main(["triage", "--json", str(path)])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return [code] + [(r["class"], r["rank"], r["start"], r["decisive"], r["fatal"]) for r in rows]


def test_tails_output_triages_as_the_journal_does(tmp_path, capsys):
    journal = (LOGS / "sglang_tp4ep2_oom.log").read_text() + (LOGS / "sglang_tp8_ready.log").read_text()
    (tmp_path / "journal.log").write_text(journal)
    (tmp_path / "tail.log").write_text(_as_tail(journal, "sglang-k26-tp4ep2.service"))
    from_journal = _rows(tmp_path / "journal.log", capsys)
    assert ("cuda_oom", "TP2 EP1", 1, False, True) in from_journal  # the first start's OOM, with its rank
    assert _rows(tmp_path / "tail.log", capsys) == from_journal
    # And the last start's failure, alone:
    only_oom = (LOGS / "sglang_tp4ep2_oom.log").read_text()
    (tmp_path / "oom.log").write_text(_as_tail(only_oom, "sglang-k26-tp4ep2.service"))
    rows = _rows(tmp_path / "oom.log", capsys)
    assert rows[0] == 1 and rows[1] == ("cuda_oom", "TP2 EP1", 1, True, True)
    assert ("unit_failed", None, 1, False, True) in rows  # systemd's own exit line, still systemd's
    assert not [r for r in rows[1:] if r[0] == "nccl"]  # tail's `>>` mark is not log text


def test_an_empty_input_is_an_error_in_one_line():
    done = subprocess.run([sys.executable, "-m", "console", "triage"], input="", capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1 and "empty" in done.stderr
