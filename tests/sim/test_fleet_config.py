"""[fleet]: the Prometheus URL, label mapping and auth that never comes from the file."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from fleet_text import HOST, parse

from console.config import FleetConfig, HostConfig
from console.errors import ConfigError, HostError
from console.hosts.endpoints.prometheus import auth_headers, parse_vector
from console.ops.fleet.query import fleet_queries
from console.ops.fleet.rows import HostMapper


def test_fleet_table_parses_with_defaults() -> None:
    assert parse("").fleet is None
    cfg = parse('[fleet]\nprometheus = "http://prom.example:9090/"\n').fleet
    assert cfg == FleetConfig(prometheus="http://prom.example:9090", line=1)
    full = parse('[fleet]\nprometheus = "https://thanos/prom"\nhost_label = "Hostname"\n'
                  'host_regex = "^(?P<host>[^.]+)"\nstrip_port = false\nstale_after_s = 30\n').fleet
    assert (full.host_label, full.host_regex, full.strip_port, full.stale_after_s) == (
        "Hostname", "^(?P<host>[^.]+)", False, 30.0)


@pytest.mark.parametrize(("text", "message"), [
    ('prometheus = "http://u:secret@prom:9090"', "hosts.toml:2: fleet.prometheus: credentials do not belong"),
    ('prometheus = "prom:9090"', "hosts.toml:2: fleet.prometheus: expected an http(s) URL"),
    ('prometheus = "http://prom"\nhost_regex = "([a-z"', "hosts.toml:3: fleet.host_regex: not a regular expression"),
    ('prometheus = "http://prom"\nhost_regex = "^gpu"', "hosts.toml:3: fleet.host_regex: needs a group"),
    ('prometheus = "http://prom"\nhost_label = "in-stance"', "hosts.toml:3: fleet.host_label: 'in-stance' is not"),
    ('prometheus = "http://prom"\ntoken = "x"', "hosts.toml:3: fleet.token: unknown key"),
    ('host_label = "instance"', "fleet.prometheus: required key missing"),
])
def test_bad_fleet_tables_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse("[fleet]\n" + text + "\n")
    assert str(err.value).startswith(message) or message in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_auth_comes_from_the_environment_then_netrc(tmp_path: Path) -> None:
    url = "https://prom.example:9090"
    assert auth_headers(url, {"HOME": str(tmp_path)}) == {}
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine prom.example login ops password s3cret\n")
    netrc.chmod(0o600)
    basic = "Basic " + base64.b64encode(b"ops:s3cret").decode()
    assert auth_headers(url, {"HOME": str(tmp_path)}) == {"Authorization": basic}
    assert auth_headers("http://other:9090", {"HOME": str(tmp_path)}) == {}
    env = {"HOME": str(tmp_path), "SERVE_CONSOLE_PROMETHEUS_TOKEN": "tok"}
    assert auth_headers(url, env) == {"Authorization": "Bearer tok"}
    env["SERVE_CONSOLE_PROMETHEUS_AUTHORIZATION"] = "Basic abc"
    assert auth_headers(url, env) == {"Authorization": "Basic abc"}
    broken = tmp_path / "broken"
    broken.write_text("login x\n")
    with pytest.raises(HostError, match="cannot read"):
        auth_headers(url, {"NETRC": str(broken)})


def test_host_mapper_regex_port_and_addresses() -> None:
    hosts = [HostConfig(name="alpha", address="10.0.0.7"), HostConfig(name="gpu-08")]
    mapper = HostMapper(FleetConfig(prometheus="http://p"), hosts)
    assert mapper.host("10.0.0.7:9400") == "alpha"
    assert mapper.host("GPU-08:8000") == "gpu-08"
    assert mapper.host("[fd00::9]:9400") == "fd00::9"
    assert mapper.host("gpu-99") == "gpu-99"
    regex = HostMapper(FleetConfig(prometheus="http://p", host_regex=r"^(?P<host>[^.]+)\.dc1", strip_port=False))
    assert regex.host("gpu-12.dc1.example:9400") == "gpu-12"
    assert regex.host("gpu-12.dc2.example:9400") is None
    whole = HostMapper(FleetConfig(prometheus="http://p", strip_port=False))
    assert whole.host("gpu-12:9400") == "gpu-12:9400"


def test_the_queries_cover_both_engines_names_and_the_label() -> None:
    queries = fleet_queries(FleetConfig(prometheus="http://p", host_label="Hostname", rate_window_s=120))
    assert len(queries) == 3  # GPUs, engines and up, last seen: a few HTTP calls, not one per host
    query = " ".join(queries)
    for name in ("sglang:num_running_reqs", "vllm:num_requests_running", "vllm:gpu_cache_usage_perc",
                 "sglang:generation_tokens_total", "DCGM_FI_DEV_FB_FREE", "[120s]", "by (Hostname)"):
        assert name in query
    assert "by (instance)" not in query


def test_vector_answers_and_errors() -> None:
    doc = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"instance": "a"}, "value": [10.5, "3"]},
        {"metric": {"instance": "b"}, "value": [10.5, "NaN"]},
        {"metric": {"instance": "c"}, "value": "garbage"},
    ]}}
    (only,) = parse_vector(doc, "prometheus x")
    assert (only.labels, only.value, only.evaluated_at) == ({"instance": "a"}, 3.0, 10.5)
    with pytest.raises(HostError, match=r"query refused \(bad_data\): parse error"):
        parse_vector({"status": "error", "errorType": "bad_data", "error": "parse error"}, "prometheus x")
    with pytest.raises(HostError, match="expected an instant vector, got 'matrix'"):
        parse_vector({"status": "success", "data": {"resultType": "matrix", "result": []}}, "prometheus x")


async def test_the_client_sends_the_header_and_names_the_fix_on_401(monkeypatch, tmp_path: Path) -> None:
    from aiohttp import web

    from console.hosts.endpoints.prometheus import PrometheusClient

    async def query(request):
        if request.headers.get("Authorization") != "Bearer tok":
            return web.Response(status=401)
        form = await request.post()
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"q": form["query"]}, "value": [1.0, "1"]}]}})

    app = web.Application()
    app.router.add_post("/api/v1/query", query)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("NETRC", raising=False)
    monkeypatch.delenv("SERVE_CONSOLE_PROMETHEUS_AUTHORIZATION", raising=False)
    try:
        monkeypatch.delenv("SERVE_CONSOLE_PROMETHEUS_TOKEN", raising=False)
        anonymous = PrometheusClient(url)
        with pytest.raises(HostError, match="HTTP 401: set SERVE_CONSOLE_PROMETHEUS_TOKEN"):
            await anonymous.query("up")
        await anonymous.close()
        monkeypatch.setenv("SERVE_CONSOLE_PROMETHEUS_TOKEN", "tok")
        client = PrometheusClient(url)
        (sample,) = await client.query('sum by (instance) (up{job="a b"})')
        assert sample.labels == {"q": 'sum by (instance) (up{job="a b"})'}  # sent as a form, intact
        await client.close()
    finally:
        await runner.cleanup()


class _ScriptedPrometheus:
    """Answers the fleet's queries from `fresh` ({host: sample time}) and `seen`, at `now`."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.fresh: dict[str, float] = {}
        self.seen: dict[str, float] = {}
        self.asked: list[str] = []

    async def query(self, expr: str, *, at=None):
        from console.hosts.endpoints.prometheus import VectorSample

        def sample(host: str, field: str, value: float) -> VectorSample:
            return VectorSample({"instance": f"{host}:9400", "sc_field": field}, value, self.now)

        if "max_over_time" in expr:
            self.asked.append("seen")
            return [sample(h, "gpus_seen", t) for h, t in self.seen.items()]
        if "DCGM_FI_DEV_FB_USED" in expr:
            self.asked.append("gpus")
            return [s for h, t in self.fresh.items() for s in (sample(h, "gpus_ts", t), sample(h, "gpus_used_mib", 5.0))]
        self.asked.append("engines")
        return [sample(h, "up", 1.0) for h in self.fresh]

    async def close(self) -> None:
        pass


async def test_last_seen_is_asked_once_a_minute_or_when_a_host_stops_reporting() -> None:
    from console.ops.fleet.rows import PrometheusFleet

    server = _ScriptedPrometheus()
    fleet = PrometheusFleet(FleetConfig(prometheus="http://p"), client=server)  # type: ignore[arg-type]
    server.fresh = {"a": 995.0, "b": 990.0}
    server.seen = dict(server.fresh)
    first = {r.host: r for r in await fleet.rows()}
    assert server.asked == ["gpus", "engines", "seen"] and first["b"].age_s == 10.0
    server.asked.clear()
    server.now = 1015.0
    server.fresh = {"a": 1010.0, "b": 1005.0}
    await fleet.rows()
    assert server.asked == ["gpus", "engines"]  # nothing vanished: two calls
    server.asked.clear()
    server.now, server.fresh, server.seen = 1030.0, {"a": 1025.0}, {"a": 1025.0, "b": 1005.0}
    gone = {r.host: r for r in await fleet.rows()}
    assert server.asked == ["gpus", "engines", "seen"]  # b vanished: asked at once
    assert gone["b"].stale and gone["b"].age_s == 25.0 and gone["b"].gpus_used_mib is None
    server.asked.clear()
    server.now = 1045.0
    later = {r.host: r for r in await fleet.rows()}
    assert server.asked == ["gpus", "engines"] and later["b"].age_s == 40.0  # the cached time, older now
    assert fleet.seen_queries == 2


def test_match_goes_into_every_selector_and_bad_matchers_are_refused() -> None:
    cfg = parse('[fleet]\nprometheus = "http://prom"\nmatch = \'cluster="gpu-a", job=~"dcgm|vllm"\'\n').fleet
    queries = " ".join(fleet_queries(cfg))
    assert 'DCGM_FI_DEV_FB_USED{cluster="gpu-a", job=~"dcgm|vllm"}' in queries
    assert '"sglang:num_running_reqs|vllm:num_requests_running",cluster="gpu-a", job=~"dcgm|vllm"}' in queries
    for bad in ('cluster=gpu', '"x"} or vector(1) or {a="b"', ""):
        with pytest.raises(ConfigError, match="hosts.toml:3: fleet.match: .* is not PromQL label matchers"):
            parse(f"[fleet]\nprometheus = \"http://prom\"\nmatch = '{bad}'\n")


def test_fleet_at_without_prometheus_is_a_usage_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    config = tmp_path / "hosts.toml"
    config.write_text(HOST.format(extra=""))
    proc = subprocess.run([sys.executable, "-m", "console", "--config", str(config), "fleet", "--at", "1"],
                          capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().endswith("--at needs a [fleet] prometheus = URL table")
    assert len(proc.stderr.strip().splitlines()) == 1
