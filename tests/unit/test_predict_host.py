"""`predict --host`: the model, engine, GPUs and layouts from hosts.toml (the demo cluster), and the
calibration from the host's stored probe results."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from console.cli import main
from console.ops.audit import open_audit
from console.ops.explore import ResultsStore

DEMO = str(Path(__file__).resolve().parents[2] / "console" / "sim" / "demo.toml")


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVE_CONSOLE_STATE_DIR", str(tmp_path))
    return tmp_path


def predict(capsys, *args: str) -> list[dict]:
    code = main(["--config", DEMO, "predict", "--host", "demo", "--json", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def store_probe(layout: str, concurrency: int, tpot_ms: float) -> None:
    """A stored probe level, as `probe` writes one (the columns calibration reads)."""
    audit = open_audit()
    store = ResultsStore.beside(audit)
    store.close()
    audit.close()
    line = {"event": "probe", "layout": layout, "outcome": "measured", "concurrency": concurrency,
            "mean_tpot_ms": tpot_ms, "output_throughput": concurrency * 1000 / tpot_ms,
            "mean_concurrency": float(concurrency)}  # fmt: skip
    with sqlite3.connect(audit.path) as db:
        db.execute(
            "INSERT INTO probe_results (taken_at, host, service, layout, engine, model, concurrency,"
            " params_json, result_json) VALUES (?,?,?,?,?,?,?,?,?)",
            (time.time(), "demo", "kimi-k2.6", layout, "sglang", "kimi", concurrency,
             json.dumps({"input_len": 1000, "output_len": 1000}), json.dumps(line)),
        )  # fmt: skip


def test_every_layout_of_the_service_from_the_config(capsys, state_dir) -> None:
    rows = predict(capsys)
    assert [r["layout"] for r in rows] == ["EP8", "PP8", "TP8", "TP4 EP2"]
    assert rows[-1]["verdict"] == "oom" and rows[-1]["output_tok_s"] is None
    assert not any(r["calibrated"] for r in rows)


def test_the_hosts_history_calibrates(capsys, state_dir) -> None:
    before = {r["layout"]: r for r in predict(capsys, "--layout", "TP8", "--layout", "PP8")}
    store_probe("TP8", 1, 1000 / 26.3)
    after = {r["layout"]: r for r in predict(capsys, "--layout", "TP8", "--layout", "PP8")}
    assert after["TP8"]["calibrated"] is True
    assert abs(after["TP8"]["per_request_tok_s"] - 26.3) < abs(before["TP8"]["per_request_tok_s"] - 26.3)
    assert abs(after["TP8"]["per_request_tok_s"] - 26.3) / 26.3 < 0.05


def test_a_layout_the_service_lacks_is_one_line(capsys, state_dir) -> None:
    code = main(["--config", DEMO, "predict", "--host", "demo", "--layout", "TP3"])
    _, err = capsys.readouterr()
    assert code == 2
    assert "demo/kimi-k2.6: no layout 'TP3'" in err and len(err.strip().splitlines()) == 1


def test_gpus_said_by_hand_override_the_hosts(capsys, state_dir) -> None:
    rows = predict(capsys, "--gpu", "H200-SXM", "--gpus", "8", "--layout", "TP8")
    on_pcie = predict(capsys, "--layout", "TP8")
    assert rows[0]["per_request_tok_s"] > on_pcie[0]["per_request_tok_s"]  # H200 over NVLink beats PCIe cards
