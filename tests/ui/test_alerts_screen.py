"""The alerts screen (`A`): what the watch daemon raised, when, and when it resolved, from the state file."""

from __future__ import annotations

from fixed_host import fixed_app
from pilot_wait import settle
from screen_text import screen_text

from console.domain.alerts import (
    CRASH_LOOP,
    ENGINE_FAILED,
    AlertBook,
    AlertThresholds,
    Condition,
    Scope,
    Verdict,
)
from console.ops.audit import AuditLog
from console.ops.watch import AlertStore
from console.ui.screens.alerts import AlertsScreen
from console.ui.screens.host import HostScreen


def record(store: AlertStore, verdicts: list[Verdict], now: float, book: AlertBook) -> None:
    for transition in book.apply(verdicts, now):
        book.stored(store.record(transition))


async def test_a_shows_what_fired_and_resolved_and_esc_goes_back(tmp_path) -> None:
    audit = AuditLog(tmp_path / "audit.sqlite3")
    store = AlertStore(audit.path)
    book = AlertBook(AlertThresholds())
    failed = Condition(ENGINE_FAILED, "demo", "kimi-k2.6", "sglang-k26@tp4ep2.service", "TP4 EP2",
                       summary="TP4 EP2 failed: CUDA OOM on GPU 2 \x1b[2J[bold]x[/]")
    loop = Condition(CRASH_LOOP, "demo", "kimi-k2.6", "sglang-k26@tp4ep2.service", summary="crash-looping: 3 restarts")
    record(store, [Verdict(Scope(ENGINE_FAILED, "demo", "kimi-k2.6"), (failed,))], 1_700_000_000.0, book)
    record(store, [Verdict(Scope(ENGINE_FAILED, "demo", "kimi-k2.6"))], 1_700_000_060.0, book)
    record(store, [Verdict(Scope(CRASH_LOOP, "demo", "kimi-k2.6"), (loop,))], 1_700_000_100.0, book)
    store.close()
    app = fixed_app({"demo": "ep8"}, audit=audit)
    async with app.run_test(size=(160, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        await pilot.press("A")
        assert await settle(pilot, lambda: isinstance(app.screen, AlertsScreen)
                            and "1 firing, 1 resolved" in screen_text(app))
        text = screen_text(app)
        rows = [line for line in text.splitlines() if "ServeCrashLoop" in line or "ServeEngineFailed" in line]
        assert "FIRING" in rows[0] and "ServeCrashLoop" in rows[0]  # newest first
        assert "resolved" in rows[1] and "ServeEngineFailed" in rows[1]
        assert "GPU 2 \\x1b[2J[bold" in rows[1]  # the host's text shown, never obeyed (nor read as markup)
        await pilot.press("escape")
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen))
    audit.close()


async def test_with_nothing_recorded_it_says_who_records_alerts(tmp_path) -> None:
    audit = AuditLog(tmp_path / "audit.sqlite3")
    app = fixed_app({"demo": "ep8"}, audit=audit)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, lambda: isinstance(app.screen, HostScreen))
        await pilot.press("A")
        assert await settle(pilot, lambda: "serve-console watch (the daemon) records them" in screen_text(app))
    audit.close()
