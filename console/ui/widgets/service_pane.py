"""Service pane: unit state, active layout and its fit, health, and the engine's readiness phase."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

from rich.text import Text
from textual import work
from textual.message import Message
from textual.widget import Widget

from console.domain.safe_text import shown
from console.domain.values import Phase
from console.ops.status import FOREIGN
from console.ops.views import ServiceView
from console.ui.widgets.polling import poll_forever
from console.ui.worker_errors import NotifiesWorkerErrors


class ServiceUpdated(Message):
    """A fresh status of a service; fires once per poll, so newer ones replace queued ones."""

    def __init__(self, host: str, view: ServiceView) -> None:
        super().__init__()
        self.host, self.view = host, view

    def can_replace(self, message: Message) -> bool:
        return (isinstance(message, ServiceUpdated) and message.host == self.host
                and message.view.service == self.view.service)


def age_text(seconds: float | None) -> str:
    """3s, 4m12s, 2h05m: short and free of wall-clock time."""
    if seconds is None:
        return "-"
    s = int(max(0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


#: The width of a row's label column.
LABEL_W = 8


def node_failed(view: ServiceView) -> bool:
    """A service over several hosts with a dead node, or a node left running without its head."""
    return view.group == "dead" or bool(view.orphans)


class ServicePane(NotifiesWorkerErrors, Widget):
    """Polls the service's status in its own worker; failed shows in colour and in words."""

    COMPONENT_CLASSES = {"service--label", "service--ok", "service--warn", "service--bad", "service--dim",
                         "service--banner"}

    def __init__(self, host_name: str, fetch: Callable[[], Awaitable[ServiceView]], *, refresh_s: float,
                 clock: Callable[[], float], busy: Callable[[], bool] = lambda: False,
                 id: str | None = None) -> None:
        super().__init__(id=id)
        self.host_name = host_name
        self.fetch = fetch
        self.busy = busy
        """True while the host runs a switch: the pane is polled then even out of sight."""
        self.refresh_s = refresh_s
        self.clock = clock
        self.view: ServiceView | None = None
        self.phase_override: Phase | None = None
        self.phase_at: float | None = None
        """When the journal last moved the phase: a health sample taken before it may be out of date."""
        self._wake = asyncio.Event()
        self.fresh_health = False
        """The next fetch probes health now (poll_now asked; the screen's fetch reads and clears it)."""
        self.error: str | None = None
        self.last_ok_at: float | None = None
        """When the last status without an error arrived (the data's age when the host goes down)."""
        self.border_title = "service"

    def on_mount(self) -> None:
        self.poll()

    @work(exclusive=True, group="service-poll", exit_on_error=False)
    async def poll(self) -> None:
        await poll_forever(
            self.fetch, show=self.show, fail=self._failed, idle_s=self.refresh_s,
            wanted=lambda: self.view is None or self.screen.is_current or self.busy(),
            wait=lambda: self._sleep(self._next_wait_s()), timeout_s=max(5.0, 3 * self.refresh_s),
        )

    def _failed(self, reason: str) -> None:
        self.error = shown(reason)  # shown as stale with its reason (host text: made inert); the poll goes on
        self._restyle()

    def _next_wait_s(self) -> float:
        """The poll interval, shorter while the journal says READY and the probe does not agree yet."""
        view = self.view
        health = view.health if view is not None else None
        if self.phase_override == Phase.READY and health is not None and health.status != "ready":
            return min(self.refresh_s, 0.5)
        return self.refresh_s

    async def _sleep(self, seconds: float) -> None:
        """Sleep until the next poll, or until `poll_now` asks for one."""
        self._wake.clear()
        try:
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        except TimeoutError:
            pass

    def poll_now(self) -> None:
        """Fetch the status (and probe health) now, not at the next interval: the phase reached READY
        or a switch ended, and the last health reading predates that."""
        self.fresh_health = True
        self._wake.set()

    def show(self, view: ServiceView) -> None:
        """Render a status (tests feed fixed ones through here too)."""
        self.error = shown(view.error) if view.error is not None else None
        if view.error is None:
            self.last_ok_at = view.taken_at
        if self.view is not None and view.unit != self.view.unit:
            self.phase_override = None
        self.view = view
        self.post_message(ServiceUpdated(self.host_name, view))
        self._restyle()

    def set_phase(self, phase: Phase) -> None:
        """The readiness phase seen in the journal (newer than the last poll)."""
        if phase != self.phase_override:
            self.phase_at = self.clock()
            if phase == Phase.READY:
                self.poll_now()
        self.phase_override = phase
        self.refresh()

    def _restyle(self) -> None:
        view = self.view
        failed = view is not None and ((view.state is not None and view.state.is_failed) or node_failed(view))
        self.set_class(failed, "-failed")
        age = None if self.last_ok_at is None else self.clock() - self.last_ok_at
        stale = self.error is not None or (age is not None and age > max(3 * self.refresh_s, 5.0))
        self.set_class(stale, "-stale")
        title = f"service {view.service}" if view else "service"
        if stale:
            title += f" · STALE, data {age_text(age)} old" if age is not None else " · no data yet"
        self.border_title = title
        self.border_subtitle = Text(self.error or "")  # host text (made inert in show/_failed): never markup
        self.refresh(layout=True)

    def render(self) -> Text:
        view = self.view
        s = self.get_component_rich_style
        if view is None:
            return Text(self.error or "waiting for the first status…", style=s("service--dim"))
        out = Text(no_wrap=True, overflow="ellipsis")
        st = view.state

        def label(text: str) -> None:
            out.append(f"{text:<{LABEL_W}}", style=s("service--label"))

        died_quietly = st is not None and not st.is_failed and view.death is not None
        nodes_bad = node_failed(view) or view.group == "unresponsive"
        if nodes_bad and not (st is not None and st.is_failed):  # the head runs, or nothing does: a node
            out.append(" FAILED " if node_failed(view) else " DEGRADED ", style=s("service--banner"))
            out.append(f" {'a node runs without its head' if view.orphans else f'a node is {view.group}'}",
                       style=s("service--bad"))  # fmt: skip
            out.append("\n")
            label("")
            out.append(self.recovery_keys(), style=s("service--bad"))
            out.append("\n")
        elif st is not None and (st.is_failed or died_quietly):
            out.append(" FAILED ", style=s("service--banner"))
            if died_quietly:  # vLLM exits 0 after its engine core dies: systemd says nothing failed
                out.append(f" {shown(view.death or '')}", style=s("service--bad"))
            else:
                out.append(f" result {st.result or '-'}", style=s("service--bad"))
            if st.exec_main_status is not None and not died_quietly:
                out.append(f", status {st.exec_main_status}", style=s("service--bad"))
            out.append("\n")
            label("")
            out.append(self.recovery_keys(), style=s("service--bad"))
            out.append("\n")
        label("unit")
        out.append(f"{view.unit or '-'}\n")
        label("state")
        if st is None and view.error is not None and view.error.startswith("units:"):
            out.append("unknown (the host does not answer)\n", style=s("service--warn"))
        elif st is None:
            out.append("inactive (no unit running)\n", style=s("service--dim"))
        else:
            level = ("service--bad" if st.is_failed or node_failed(view) else "service--warn" if nodes_bad
                     else "service--ok" if st.active == "active" else "service--warn")  # fmt: skip
            out.append(f"{st.active}/{st.sub or '-'}", style=s(level))
            out.append(f" · result {st.result or '-'}\n")
        label("since")
        since = None if st is None or st.since is None else self.clock() - st.since
        out.append(f"{age_text(since)} ago" if since is not None else "-")
        if st is not None and st.n_restarts is not None:
            out.append(f" · restarts {st.n_restarts}")
        out.append("\n")
        label("layout")
        out.append(view.layout or "-")
        if view.gpus_used is not None:
            out.append(f" · {view.gpus_used} GPUs")
        if view.fit_verdict:
            level = {"fits": "service--ok", "tight": "service--warn"}.get(view.fit_verdict, "service--bad")
            out.append(" · fit ")
            out.append(view.fit_verdict.upper() if level == "service--bad" else view.fit_verdict, style=s(level))
        out.append("\n")
        label("")
        out.append(view.fit_detail or "", style=s("service--dim"))
        out.append("\n")
        if view.last_ready_layout:  # its own row: beside the fit detail it ran past the pane's width
            label("")
            out.append(f"last ready {view.last_ready_layout}", style=s("service--dim"))
            out.append("\n")
        label("health")
        h = view.health
        if h is None:
            out.append("-", style=s("service--dim"))
        else:
            level = {"ready": "service--ok", "starting": "service--warn"}.get(h.status, "service--bad")
            out.append(h.status, style=s(level))
            detail = [f"HTTP {h.http_status}"] if h.http_status is not None else []
            if h.status == "down" and h.error:  # why: timed out, refused; its first words fit the row
                detail.append(shown(h.error.split(" (", 1)[0]))
            if self.health_is_stale(h.taken_at, h.status):
                detail.append(f"{age_text(self.clock() - h.taken_at)} ago")
            if detail:
                out.append(f" ({', '.join(detail)})")
        out.append("\n")
        if h is not None and h.status == FOREIGN:  # who answered instead of the service (host text)
            label("")
            out.append(f"answered by {shown(view.health_answered_by or 'another program')}", style=s("service--bad"))
            out.append("\n")
        if view.group is not None and view.group != "alive":  # a head's 200 over a dead or wedged node
            label("nodes")
            out.append(f"{view.group.upper()} ", style=s("service--bad" if view.group == "dead" else "service--warn"))
            self._wrapped(out, shown(view.nodes[0] if view.nodes else ""), s("service--bad"),
                          first=len(view.group) + 1)  # fmt: skip
        for orphan in view.orphans:  # a node's unit runs on while the head runs nothing: it holds its GPUs
            label("orphan")
            self._wrapped(out, shown(orphan), s("service--bad"))
        if view.serving is not None and view.serving.state == "stalled":
            self._stalled_rows(view.serving, label, out, s)
        label("phase")  # its own row: a health reading with its age leaves no room beside it
        # another program answering a service that does not run is FAILED, whatever the journal said last
        phase = Phase.FAILED if view.phase == Phase.FAILED else self.phase_override or view.phase
        if st is not None and not st.is_running and phase not in (Phase.READY, Phase.FAILED, Phase.STOPPED):
            # a start-up phase is the journal's last word only while the unit runs: a worker that died
            # after CUDA graphs (it never logs ready) is failed or stopped, not capturing for ever
            phase = Phase.FAILED if st.is_failed or view.death is not None else Phase.STOPPED
        if phase is None:
            out.append("-", style=s("service--dim"))
        else:
            level = ("service--ok" if phase == Phase.READY else "service--bad" if phase == Phase.FAILED
                     else "service--dim" if phase == Phase.STOPPED else "service--warn")
            out.append(phase.value.replace("_", " ").upper(), style=s(level))
        return out

    def _wrapped(self, out: Text, text: str, style, *, first: int = 0) -> None:
        """`text` after a row's label, wrapped at the pane's width under the label's column (the words
        that say which node and why are never cut off)."""
        import textwrap

        width = max(20, self.size.width - LABEL_W)
        lines = textwrap.wrap(text, width, initial_indent=" " * first, break_on_hyphens=False) or [""]
        for n, line in enumerate(lines):
            if n:
                out.append(" " * LABEL_W)
            out.append(line[first:] if n == 0 else line, style=style)
            out.append("\n")

    def _stalled_rows(self, verdict, label, out, s) -> None:
        """STALLED since when, why, and which ranks (docs/stalls.md); the reason and ranks are our words
        over host figures, shown inert."""
        import time as _time

        label("serving")
        since = _time.strftime("%H:%M:%S", _time.localtime(verdict.since))
        out.append("STALLED ", style=s("service--bad"))
        out.append(f"since {since} ({age_text(self.clock() - verdict.since)})", style=s("service--bad"))
        out.append("\n")
        label("pending")
        out.append(verdict.pending.words(), style=s("service--warn"))
        out.append("\n")
        label("")
        out.append(shown(verdict.reason))
        out.append("\n")
        if verdict.ranks_words:
            label("ranks")
            out.append(shown(verdict.ranks_words), style=s("service--warn"))
            out.append("\n")

    def recovery_keys(self) -> str:
        """The keys that bring a failed service back, as the operator has them mapped."""
        from console.ui.keys import display_key, key_for

        keymap = getattr(self.app, "keymap", {})
        restart, layouts = (display_key(key_for(a, keymap)) for a in ("host.restart", "host.layouts"))
        return f"{restart}: restart it · {layouts}: another layout"

    def health_is_stale(self, taken_at: float, status: str | None = None) -> bool:
        """A health reading older than a poll, or taken before the phase last moved, shows its age.

        A ready engine is probed only every READY_PROBE_INTERVAL_S (ops.status), so its reading is as old
        as that without being out of date.
        """
        from console.ops.status import READY_PROBE_INTERVAL_S

        limit = max(1.5 * self.refresh_s, 2.0)
        if status == "ready":
            limit = max(limit, READY_PROBE_INTERVAL_S + self.refresh_s)
        age = self.clock() - taken_at
        return age > limit or (self.phase_at is not None and taken_at < self.phase_at)

    def with_view(self, **changes: object) -> None:
        if self.view is not None:
            self.show(replace(self.view, **changes))  # type: ignore[arg-type]
