"""The rolling record's files: the format read back, rotation, the cap, and what a crash leaves."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from console.ops.bundle import Incident, bundles_root, latest_bundle, read_bundle
from console.ops.recorder import (
    RecordWriter,
    folder_size,
    list_segments,
    read_segment,
    read_window,
    write_incident_bundle,
)


class Clock:
    def __init__(self, t: float = 1_700_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_records_read_back_in_time_order_and_redacted(tmp_path: Path) -> None:
    clock = Clock()
    w = RecordWriter(tmp_path, clock=clock)
    w.add("journal", ts=clock.t + 2, node="n1", unit="u", message="Authorization: Bearer sk-abcdefabcdefabcdefabcdef")
    w.add("unit_state", node="n1", unit="u", active="active")
    w.close()
    records = read_window(tmp_path)
    assert [r["kind"] for r in records] == ["unit_state", "journal"]
    assert "sk-abcdef" not in json.dumps(records)
    # each segment is plain gzip: any tool reads it
    (seg,) = list_segments(tmp_path)
    assert gzip.decompress(seg.read_bytes()).count(b"\n") == 2


def test_one_member_per_second_not_per_record(tmp_path: Path) -> None:
    clock = Clock()
    w = RecordWriter(tmp_path, clock=clock)
    for i in range(10):
        clock.t += 0.05
        w.add("metrics", value=i)
    assert w.records_written == 0  # still buffered: less than a second old
    clock.t += 1.0
    w.tick()
    assert w.records_written == 10
    w.close()


def test_rotation_keeps_the_folder_under_its_cap(tmp_path: Path) -> None:
    clock = Clock()
    cap = 1 << 16
    w = RecordWriter(tmp_path, cap_bytes=cap, clock=clock)
    for i in range(3000):
        clock.t += 0.5
        w.add("journal", node="n", unit="u", message=f"line {i} " + f"x{i * 7919 % 100003}" * 20)
    w.close()
    assert len(list_segments(tmp_path)) > 1
    assert folder_size(tmp_path) <= cap + w.segment_bytes
    kept = read_window(tmp_path)
    # the newest records are kept, the oldest went with their segments
    assert kept[-1]["message"].startswith("line 2999 ")
    assert not kept[0]["message"].startswith("line 0 ")


def test_a_crash_mid_member_loses_only_the_last_second(tmp_path: Path) -> None:
    clock = Clock()
    w = RecordWriter(tmp_path, clock=clock)
    for second in range(5):
        for i in range(4):
            w.add("gpu", second=second, i=i)
        clock.t += 1.0
        w.tick()
    (seg,) = list_segments(tmp_path)
    whole = seg.read_bytes()
    before_last = len(whole)
    for i in range(4):
        w.add("gpu", second=5, i=i)
    clock.t += 1.0
    w.tick()
    data = seg.read_bytes()
    # kill -9 in the middle of the last member's write
    seg.write_bytes(data[: before_last + (len(data) - before_last) // 2])
    got = list(read_segment(seg))
    assert [(r["second"], r["i"]) for r in got] == [(s, i) for s in range(5) for i in range(4)]


def test_a_window_is_cut_into_a_bundle_the_console_reads(tmp_path: Path) -> None:
    clock = Clock()
    folder = tmp_path / "record" / "h"
    w = RecordWriter(folder, clock=clock)
    t0 = clock.t
    w.add("journal", ts=t0 - 900, node="h", unit="svc", service="svc", message="too early")
    w.add("journal", ts=t0 - 10, node="h", unit="svc", service="svc", message="CUDA out of memory")
    w.add("unit_state", ts=t0, node="h", unit="svc", service="svc", active="failed", sub="failed")
    w.add("metrics", ts=t0 - 5, service="other", value=1)
    w.close()
    incident = Incident(kind="death", reason="unit failed", unit="svc", started_at=t0, verdict_at=t0)
    path, size = write_incident_bundle(folder, tmp_path, host="h", service="svc", engine="vllm",
                                       nodes=[{"name": "h", "address": "h"}], incident=incident, now=t0 + 30)
    bundle = read_bundle(path)
    assert size > 0 and bundle.header["source"] == "record"
    assert [r.get("message") or r["record"] for r in bundle.timeline] == ["CUDA out of memory", "unit_state"]
    assert bundle.incident["kind"] == "death"


def test_the_newest_bundle_of_a_service_is_found_by_its_header(tmp_path: Path) -> None:
    folder = tmp_path / "record" / "a-b"
    w = RecordWriter(folder)
    w.add("journal", node="a-b", unit="c", service="c", message="died")
    w.close()
    paths = []
    for host, service, at in (("a-b", "c", 1_700_000_000.0), ("a", "b-c", 1_700_000_100.0),
                              ("a-b", "c", 1_700_000_050.0)):
        incident = Incident(kind="ServeEngineFailed", reason="x", unit="c", started_at=at, verdict_at=at)
        paths.append(write_incident_bundle(folder, tmp_path, host=host, service=service, engine="vllm", nodes=[],
                                           incident=incident, now=at)[0])
    assert latest_bundle(bundles_root(tmp_path), "a-b", "c") == paths[2]
    assert latest_bundle(bundles_root(tmp_path), "a", "b-c") == paths[1]
    assert latest_bundle(bundles_root(tmp_path), "a", "c") is None
