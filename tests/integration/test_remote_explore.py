"""One explore of two layouts over SSH against real systemd: each switched, probed through the SSH port
forward the health probe uses, recorded; the best left running."""

from __future__ import annotations

import pytest
from remote_helpers import TIME_SCALE, bed_host_config, k26_service

from console.config import TEMPLATE
from console.hosts.remote import build_remote_host
from console.ops.audit import AuditLog
from console.ops.explore.probe import ProbeResult, service_base_url
from console.ops.explore.probe_load import ProbeOptions
from console.ops.explore.report import ExploreOptions
from console.ops.explore.results_store import ResultsStore
from console.ops.explore.sweep import Explore

pytestmark = pytest.mark.integration


async def test_explore_of_two_layouts_over_ssh(clean_testbed, tmp_path):
    bed = clean_testbed
    bed.write_file("tb1", "/etc/serve-console/sim.env", f"SERVE_CONSOLE_SIM_TIME_SCALE={TIME_SCALE}\n")
    service = k26_service(TEMPLATE)
    host = build_remote_host(bed_host_config(bed, "tb1", gpus="nvidia-smi", services=(service,)))
    audit = AuditLog(tmp_path / "audit.sqlite")
    store = ResultsStore.beside(audit)
    events: list = []
    options = ProbeOptions(concurrency=(1, 4), num_prompts=4, input_len=16, output_len=16, warmup=1)
    try:
        result = await Explore(host, service, audit=audit, store=store, on_event=events.append).run(
            ExploreOptions(("TP8", "EP8"), options, switch_timeout_s=240)
        )
        assert [(r.layout, r.outcome) for r in result.layouts] == [("TP8", "measured"), ("EP8", "measured")]
        # Through the forward: the engine listens on the host's loopback, the probe ran here.
        assert "127.0.0.1" in await service_base_url(host, service)
        levels = [e for e in events if isinstance(e, ProbeResult)]
        assert [(e.layout, e.summary.concurrency) for e in levels] == [("TP8", 1), ("TP8", 4), ("EP8", 1), ("EP8", 4)]
        assert all(e.summary.completed == 4 and e.summary.failed == 0 for e in levels)
        assert all(e.summary.tokens_from == "usage" and e.summary.total_output_tokens == 64 for e in levels)
        assert result.best == "EP8" and result.left_running == "EP8"
        assert len(store.probes(explore_id=result.explore_id)) == 4
        print(f"\nexplore over SSH: {result.elapsed_s:.1f} s; "
              + ", ".join(f"{r.layout} switch {r.switch_s:.1f} s probe {r.probe_s:.1f} s" for r in result.layouts))
    finally:
        store.close()
        audit.close()
        await host.close()
