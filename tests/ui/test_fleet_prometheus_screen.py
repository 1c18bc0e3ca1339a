"""The fleet screen with [fleet] prometheus: every row from a real Prometheus (the backfilled fleet of
tests/fleet_prometheus.py), the engines' figures shown, a gone host DOWN with its age, and no SSH host
asked anything until it is opened; and a GPU's last Xid heading the GPU pane's note."""

from __future__ import annotations

from pathlib import Path

from fleet_prometheus import fleet_prometheus_fixture  # noqa: F401 (the session fixture)
from pilot_wait import settle
from screen_text import notified

from console.config import FleetConfig, HostConfig, ServiceConfig
from console.config.model import ConsoleConfig
from console.domain.values import Engine
from console.factory import open_hosts
from console.ui.app import ConsoleApp


def _config(url: str, names: list[str]) -> ConsoleConfig:
    service = ServiceConfig(name="llm", engine=Engine.SGLANG, url="http://127.0.0.1:30000")
    hosts = tuple(HostConfig(name=n, address="192.0.2.1", connect_timeout_s=30.0, services=(service,))
                  for n in names)  # TEST-NET: an SSH connection here would hang, not answer
    return ConsoleConfig(path=Path("hosts.toml"), hosts=hosts, fleet=FleetConfig(prometheus=url))


def _cell(table, host: str, column: str) -> str:
    return str(table.get_cell(host, column))


async def test_rows_come_from_prometheus_and_no_host_is_connected(fleet_prometheus) -> None:
    fleet, url = fleet_prometheus
    config = _config(url, [fleet.names[0], "absent"])
    hosts = open_hosts(config)
    app = ConsoleApp(hosts, config=config, auto_open=False)
    async with app.run_test(size=(140, 40)) as pilot:
        table = app.screen.query_one("#fleet-table")
        assert await settle(pilot, lambda: len(table.summaries) == len(fleet.names) + 1)
        assert list(table.host_names[:2]) == [fleet.names[0], "absent"]  # configured first, then the rest
        first = fleet.names[0]
        assert _cell(table, first, "link") == "prom"
        assert _cell(table, first, "engines") == "0 run · 0 wait · KV 0% · 100 tok/s"
        assert _cell(table, first, "GPU memory").endswith("· 7/8 busy")
        gone = fleet.names[fleet.stale]  # its series ended 8 minutes before the session
        assert _cell(table, gone, "link") == "DOWN" and _cell(table, gone, "data age").startswith("STALE 8m")
        down = fleet.names[fleet.down]  # engine target down: figures shown, the row marked
        assert _cell(table, down, "health") == "FAILED 1/2 targets up"
        assert _cell(table, "absent", "link") == "DOWN"
        assert "no series" in _cell(table, "absent", "health")
        assert [h.link.state for h in hosts] == ["connecting", "connecting"]  # never asked over SSH
        assert all(h.link.last_ok_at is None and h.link.error is None for h in hosts)
        table.move_cursor(row=table.get_row_index(fleet.names[5]))
        await pilot.press("enter")  # a host only Prometheus knows: said so, nothing opened
        assert await settle(pilot, lambda: any("not in hosts.toml" in str(n.message) for n in notified(app)))
        assert app.screen is not None and app.host_screen(fleet.names[5]) is None


async def test_gpu_pane_puts_a_gpus_last_xid_first() -> None:
    import dataclasses as dc

    from fixed_host import fixed_app, gpu_pane_with_data

    app = fixed_app({"demo": "ep8"})
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await gpu_pane_with_data(pilot)
        snap = pane.snapshot
        gpus = tuple(dc.replace(g, xid=79) if g.index == 3 else g for g in snap.gpus)
        with_xid = dc.replace(snap, gpus=gpus)
        app.screen.host.gpus.snapshot = with_xid  # the next polls say the same
        pane.ingest(with_xid)
        pane.set_gpus_in_use(4, 78_500)  # GPUs 4-7 hold memory the layout does not use: second place
        await pilot.pause()
        assert pane.border_subtitle.startswith("GPU 3 reported Xid 79 (GPU has fallen off the bus)")
        assert pane.border_subtitle.endswith("(+4 more)")
