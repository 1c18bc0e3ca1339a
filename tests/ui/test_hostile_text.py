"""Host text is data, never code: the same hostile string from every source a host (or hosts.toml) feeds
the console, walked through every widget that shows it (issue 18, B6).

The string carries an OSC 2 (sets the terminal's title), a CSI 2J (clears the screen), the one-byte C1
CSI/OSC/ST, a bidi override, `[/]` (a closing tag with nothing open: a MarkupError that crashed the TUI)
and `[@click=app.quit]` (an action a click would run). Its sources: journal lines and the unit names a
host reports, `systemctl show` values, metric labels and the metrics parser's notes and errors, GPU and
process names, model ids from `/v1/models` (in the probe's error), Prometheus' labels and error texts,
and a path from hosts.toml. The walk: the fleet screen, the host screen's panes, the picker, the probe
screen, the failure card and the notifications. Nothing may crash, stop a poll, run an action, or put a
control character on the screen; the text itself stays readable (`[/]` shown as `[/]`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import Awaitable, Callable

from aiohttp import web
from fixed_host import T0, FixedGpus, FixedProbe, FixedServices, _no_lock, fixed_config, frozen_clock
from pilot_wait import settle
from screen_text import notified, screen_text

from console.config import FleetConfig
from console.domain.metrics import parse_metrics
from console.domain.values import GpuProcess, GpuSnapshot, HealthSample
from console.errors import HostError
from console.hosts.base import Host, LinkStatus
from console.hosts.endpoints import MetricsUnavailable
from console.hosts.gpus.dcgm import parse_dcgm
from console.hosts.systemd.parse import journal_entry_from_json, unit_state_from_show
from console.ops.switch import SwitchResult
from console.ui.app import ConsoleApp
from console.ui.screens.explore import ExploreScreen
from console.ui.screens.host import HostScreen
from console.ui.screens.picker import LayoutPicker
from console.ui.screens.probe import ProbeScreen
from console.ui.widgets.engine_pane import EnginePane
from console.ui.widgets.failure_card import FailureCard
from console.ui.widgets.fleet_table import FleetTable
from console.ui.widgets.gpu_pane import GpuPane
from console.ui.widgets.journal_pane import JournalPane
from console.ui.widgets.service_pane import ServicePane

HOSTILE = "x\x1b]2;pwned\x07\x1b[2J\x9b1m\x9d0;t\x9c\u202eevil\u202c [/] [@click=app.quit]q[/] [bold]y"
LIVE = set("\x1b\x07\x9b\x9d\x9c\u202e\u202c")
#: The same string where a label value or a name must fit on one line of a table.
NAME = "gpu-9[/]\x1b]2;pwned\x07\u202e[@click=app.quit]"


def _live(text: object) -> set[str]:
    return LIVE & set(str(text or ""))


class HostileMetrics:
    """An engine whose /metrics holds a bucket with a hostile `le`, then fails with a hostile reason."""

    def __init__(self) -> None:
        self.fail = False

    async def scrape(self):
        if self.fail:
            raise MetricsUnavailable(HOSTILE)
        text = (f'sglang:num_running_reqs 3\nsglang:token_usage 0.2\n'
                f'sglang:time_to_first_token_seconds_bucket{{le="{NAME}"}} 1\n')
        return parse_metrics(text, T0, "sglang")


class HostileServices(FixedServices):
    """The unit's state as `systemctl show` reports it, every value hostile; then a hostile failure."""

    def __init__(self, host: str, unit: str, journal: list) -> None:
        show = (f"Id={unit}\nActiveState=active\nSubState=running {HOSTILE}\nResult=success {HOSTILE}\n"
                f"MainPID=4242\nNRestarts=0\n")
        super().__init__(host, {unit: unit_state_from_show(unit, show)}, {unit: journal})
        self.fail_with: str | None = None
        self.failing = asyncio.Event()

    def fail(self, reason: str | None) -> None:
        """From now on every call fails with `reason` (None: they work again)."""
        self.fail_with = reason
        if reason is None:
            self.failing.clear()
        else:
            self.failing.set()

    async def state(self, unit: str):
        if self.fail_with is not None:
            raise HostError(self.host, self.fail_with)
        return await super().state(unit)

    async def journal(self, unit: str, **kwargs):
        """The recorded entries, then the stream drops with a hostile reason once `fail_with` is set."""
        async for entry in super().journal(unit, **{**kwargs, "follow": False}):
            yield entry
        await self.failing.wait()
        raise HostError(self.host, str(self.fail_with))


def _journal(unit: str) -> list:
    """journalctl -o json lines through the real parser: a hostile message, and one from a unit whose
    reported name is hostile."""
    lines = [
        {"__CURSOR": "1", "__REALTIME_TIMESTAMP": str(int((T0 - 5) * 1e6)), "MESSAGE": HOSTILE, "_PID": "4242",
         "_SYSTEMD_UNIT": unit, "PRIORITY": "3"},
        {"__CURSOR": "2", "__REALTIME_TIMESTAMP": str(int((T0 - 4) * 1e6)), "MESSAGE": f"RuntimeError: {HOSTILE}",
         "_PID": "4242", "_SYSTEMD_UNIT": f"sglang@{NAME}.service", "PRIORITY": "3"},
    ]
    return [journal_entry_from_json(json.dumps(line), unit) for line in lines]


def hostile_host(cfg) -> Host:
    service = cfg.services[0]
    unit = service.unit_for(service.layout("EP8"))
    dcgm = "\n".join(f'DCGM_FI_DEV_FB_USED{{gpu="{i}",modelName="{NAME}"}} 70000\n'
                     f'DCGM_FI_DEV_FB_FREE{{gpu="{i}",modelName="{NAME}"}} 27887' for i in range(8))
    gpus, _note = parse_dcgm(dcgm + "\n")
    procs = tuple(GpuProcess(pid=4242 + g.index, gpu_index=g.index, used_mib=69000, name=HOSTILE) for g in gpus)
    probe = FixedProbe(HealthSample(T0, "ready", http_status=200, latency_s=0.004))
    probe.metrics_reader = HostileMetrics()
    return Host(config=cfg, services=HostileServices(cfg.name, unit, _journal(unit)),
                gpus=FixedGpus(GpuSnapshot(taken_at=T0, gpus=tuple(gpus), processes=procs), cfg.name),
                probes={service.name: probe}, lock=_no_lock,
                link=LinkStatus(state="up", since=T0 - 3600, last_ok_at=T0))


def _prometheus_answer(mode: dict) -> web.Response:
    if mode["error"]:
        return web.json_response({"status": "error", "errorType": "bad_data", "error": HOSTILE})
    result = [{"metric": {"instance": f"{NAME}:9400", "sc_field": field}, "value": [T0, value]}
              for field, value in (("gpus_used_mib", "70000"), ("gpus_total_mib", "97887"), ("gpus_ts", str(T0)),
                                   ("up", "1"), ("targets", "1"), ("targets_up", "1"))]
    return web.json_response({"status": "success", "data": {"resultType": "vector", "result": result}})


def _openai_stub():
    """/v1/models lists a hostile model id; every completion fails quoting it, as vLLM's 404 does."""
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": NAME, "object": "model"}]})

    async def completions(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": f"The model `{NAME}` does not exist."}}, status=404)

    return {("GET", "/v1/models"): models, ("POST", "/v1/completions"): completions}


def _visible(app) -> str:
    text = screen_text(app)
    assert not _live(text), repr(text)
    return text


def _borders(app) -> None:
    for widget in app.screen.query("*"):
        for title in (widget.border_title, widget.border_subtitle):
            assert not _live(title), (widget, title)


@contextlib.asynccontextmanager
async def _serve(routes: dict[tuple[str, str], Callable[[web.Request], Awaitable[web.Response]]]):
    """A loopback server for GET and POST routes, on a free port (yielded)."""
    app = web.Application()
    for (method, path), handler in routes.items():
        app.router.add_route(method, path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


async def test_hostile_text_from_every_source_reaches_every_widget_inert(tmp_path) -> None:
    mode = {"error": False}

    async def query(request: web.Request) -> web.Response:
        return _prometheus_answer(mode)

    async with _serve({("POST", "/api/v1/query"): query}) as prometheus_port, _serve(_openai_stub()) as engine_port:
        await _walk(tmp_path, f"http://127.0.0.1:{prometheus_port}", engine_port, mode)


async def _walk(tmp_path, prometheus_url: str, engine_port: int, mode: dict) -> None:
    base = fixed_config(["demo"])
    host_cfg = base.hosts[0]
    # A path from hosts.toml that names the model config (it does not exist: its error quotes it).
    model_config = tmp_path / "[/][@click=app.quit]" / "config.json"
    services = tuple(dataclasses.replace(s, url=f"http://127.0.0.1:{engine_port}", model_config=model_config)
                     for s in host_cfg.services)
    host_cfg = dataclasses.replace(host_cfg, services=services)
    config = dataclasses.replace(base, hosts=(host_cfg,), fleet=FleetConfig(prometheus=prometheus_url))
    host = hostile_host(host_cfg)
    app = ConsoleApp([host], config=config, clock=frozen_clock)
    async with app.run_test(size=(140, 45)) as pilot:
        # The host screen: service, GPU, engine and journal panes.
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        screen = app.screen
        gpu, engine, service = screen.query_one(GpuPane), screen.query_one(EnginePane), screen.query_one(ServicePane)
        assert await settle(pilot, lambda: gpu.snapshot is not None and engine.figures is not None
                            and service.view is not None)
        text = _visible(app)
        assert "gpu-9[/]" in text  # the GPU's name from its dcgm label, shown as written
        assert "evil" in text and "[@click=app.quit]q[/] [bold]y" in text  # the journal line, markup and all
        assert "running x" in text  # the unit's SubState, as `systemctl show` said it
        _borders(app)
        await pilot.press("p")  # each GPU's processes in the sparkline's place: their names are the host's
        assert await settle(pilot, lambda: "pid 4242" in _visible(app))
        assert "[/]" in (engine.border_subtitle or "")  # the skipped bucket's note, its label as text
        # A poll that fails with hostile text: the panes show it as stale, and keep polling.
        host.probes[host_cfg.services[0].name].metrics_reader.fail = True
        host.services.fail(HOSTILE)
        host.gpus.snapshot = dataclasses.replace(host.gpus.snapshot, gpus=(), error=HOSTILE)
        engine.poll()
        gpu.poll()
        service.poll_now()
        journal = screen.query_one(JournalPane)
        assert await settle(pilot, lambda: engine.error and service.error and gpu.error
                            and "stream lost" in str(journal.border_subtitle))
        _visible(app)
        _borders(app)
        # The picker, then the probe screen, whose model id came from /v1/models.
        await pilot.press("l")
        assert await settle(pilot, lambda: isinstance(app.screen, LayoutPicker))
        assert await settle(pilot, lambda: "fit unknown" in _visible(app))  # it quotes the path
        assert "[/][@click=app.quit]" in _visible(app)
        _borders(app)
        await pilot.press("escape")
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        await pilot.press("x")  # the explore screen: it cannot predict fits either (the path again)
        assert await settle(pilot, lambda: isinstance(app.screen, ExploreScreen))
        assert await settle(pilot, lambda: "pick layouts" in _visible(app))
        _borders(app)
        await pilot.press("escape")
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        host.services.fail(None)
        app.push_screen(ProbeScreen(host, host_cfg.services[0], "EP8"))
        assert await settle(pilot, lambda: isinstance(app.screen, ProbeScreen))
        app.screen.action_confirm()
        assert await settle(pilot, lambda: "probe failed" in _visible(app), tries=200)
        assert "does not exist" in _visible(app) and "gpu-9[/]" in _visible(app), _visible(app)
        assert "[@click=app.quit]" in _visible(app)  # a link a click would follow, were it markup
        _borders(app)
        app.screen.action_cancel()
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        # The failure card, from a result whose every text is the host's.
        card = app.screen.query_one(FailureCard)
        card.show_failure(SwitchResult(host="demo", service="s", layout="EP8", outcome="failed", reason=HOSTILE,
                                       unit=NAME), [NAME])
        await pilot.pause()
        _visible(app)
        _borders(app)
        # The fleet screen: rows from Prometheus labels, then Prometheus' error text.
        await pilot.press("escape")
        assert await settle(pilot, lambda: isinstance(app.screen.query_one(FleetTable), FleetTable))
        table = app.screen.query_one(FleetTable)
        assert await settle(pilot, lambda: len(table.summaries) == 2)
        hostile_row = next(h for h in table.host_names if h != "demo")
        assert "[/]" in _visible(app)
        table.move_cursor(row=table.get_row_index(hostile_row))
        await pilot.press("enter")  # seen through Prometheus only: a notification names it
        assert await settle(pilot, lambda: any("not in hosts.toml" in n.message for n in notified(app)))
        mode["error"] = True
        table.poll()
        assert await settle(pilot, lambda: table.summaries["demo"].error and "bad_data" in table.summaries["demo"].error)
        _visible(app)
        # Every notification, the worker-error ones included: plain text, inert.
        notes = [n.message for n in notified(app)]
        assert any("not in hosts.toml" in n for n in notes)
        assert not any(_live(n) for n in notes) and not any("stopped:" in n for n in notes), notes
        assert app.is_running and app.screen is not None
