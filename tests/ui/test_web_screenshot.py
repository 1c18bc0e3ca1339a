"""ctrl+s from a web visitor writes nothing on the server (issue 30 E22): the SVG goes to the browser as a
download (textual-serve's /download/), for a read-only visitor as for any other."""

from __future__ import annotations

from fixed_host import fixed_app
from pilot_wait import settle

from console.ui.app import ConsoleApp
from console.ui.screens.host import HostScreen


async def test_ctrl_s_on_the_web_sends_the_screenshot_to_the_browser(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(ConsoleApp, "is_web", property(lambda _self: True))  # the web driver, without a browser
    server_cwd = tmp_path / "server-cwd"
    server_cwd.mkdir()
    monkeypatch.chdir(server_cwd)
    app = fixed_app({"demo": "ep8"}, readonly=True)
    delivered: list[tuple[str, dict]] = []
    monkeypatch.setattr(app, "deliver_text", lambda f, **kw: delivered.append((f.read(), kw)) or "key")
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: isinstance(app.screen, HostScreen) and app.screen.last_view is not None)
        for _ in range(3):
            await pilot.press("ctrl+s")
        assert await settle(pilot, lambda: len(delivered) == 3)
    assert list(server_cwd.iterdir()) == []  # nothing on the server's disk
    svg, options = delivered[0]
    assert svg.startswith("<svg") and options["save_filename"].endswith(".svg")
    assert options["mime_type"] == "image/svg+xml"
