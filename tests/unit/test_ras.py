"""NCCL RAS's STATUS report read for missing and dead processes (console/domain/ras.py), on the real
reports in tests/fixtures/ras (their sources in its README) and on the simulated engines' report."""

from __future__ import annotations

import pytest
from sim_fixtures import REPO

from console.domain.ras import parse_ras_status

RAS = REPO / "tests" / "fixtures" / "ras"


def test_a_healthy_job_of_32_nodes_is_healthy() -> None:
    report = parse_ras_status((RAS / "nccl-1730-healthy.txt").read_text())
    assert (report.version, report.nodes, report.processes) == ("2.26.2", 32, 256)
    assert report.healthy and not report.missing and not report.dead


def test_a_missing_process_names_its_node_and_rank() -> None:
    report = parse_ras_status((RAS / "nccl-1762-incomplete.txt").read_text())
    assert report.version == "2.27.3"
    assert report.missing == {"10.4.109.13": 1} and report.dead == {}
    assert report.missing_ranks == {"10.4.109.13": (1,)}
    assert not report.healthy and "INCOMPLETE" in report.errors


def test_a_mismatch_of_operation_counts_is_no_missing_rank() -> None:
    report = parse_ras_status((RAS / "nccl-1911-mismatch.txt").read_text())
    assert report.errors == ("MISMATCH",) and report.healthy  # a straggler, not a death
    assert report.missing_ranks == {}  # the ranks it names are under Warnings, none is missing


def test_dead_processes_of_the_simulated_worker_and_counts_past_the_listing() -> None:
    text = (REPO / "docs" / "ras.md").read_text().split("1.5 s after node 1")[1].split("```")[1]
    listed = text.replace("  ...\n", "")  # the doc elides lines; here two of eight are listed
    report = parse_ras_status(listed)
    assert report.dead == {"127.0.0.2": 2} and report.unnamed == 6
    assert report.missing_ranks == {"127.0.0.2": (8, 15)}


@pytest.mark.parametrize("text", ["", "SERVER PROTOCOL 2\n", "ERROR: Unknown command STATUS\n"])
def test_what_is_no_report_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(ValueError, match="not an NCCL RAS report"):
        parse_ras_status(text)
