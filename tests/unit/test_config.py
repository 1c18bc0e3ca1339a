"""hosts.toml: the packaged and example files load, and every broken file is one file:line error."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from console.config import (
    DROP_IN,
    ENV_FILE,
    TEMPLATE,
    UNIT_PER_LAYOUT,
    ConsoleConfig,
    UiConfig,
    demo_config_path,
    load_config,
)
from console.config import loader as config_loader
from console.config.fields import KeyLocator, dotted
from console.domain.layout import Layout
from console.domain.values import Engine
from console.errors import ConfigError, UsageError

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "configs"
KIMI = REPO / "console" / "sim" / "models" / "moonshotai--Kimi-K2.6.json"
# The verbatim copy of the public config.json that the model tests use (tests/models/SOURCES.md).
FIXTURE_KIMI = REPO / "tests" / "models" / "moonshotai--Kimi-K2.6.json"


def test_demo_cluster_is_the_seed_host() -> None:
    config = load_config(demo_config_path())
    host, vllm_host, head, worker = config.hosts
    assert (host.name, host.transport, host.gpus, host.gpu_count) == ("demo", "sim", "sim", 8)
    assert host.sim is not None
    assert host.sim.gpu_total_mib == 97887
    assert host.sim.gpu_name == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert host.sim.time_scale == 1.0
    (service,) = host.services
    assert (service.name, service.engine, service.mapping) == ("kimi-k2.6", Engine.SGLANG, TEMPLATE)
    assert service.url == "http://127.0.0.1:30000"
    assert service.model_config == KIMI
    assert [lc.name for lc in service.layouts] == ["TP8", "PP8", "EP8", "TP4 EP2"]
    assert service.layout("EP8").layout == Layout(tp=8, ep=8)  # the story's --tp-size 8 --ep-size 8
    assert service.layout("tp4ep2").layout == Layout(tp=4, ep=2)
    assert service.layout("PP8").layout == Layout(pp=8)
    assert service.unit_for(service.layout("TP4 EP2")) == "sglang-k26@tp4ep2.service"
    # The second host: four H100 80 GB serving Qwen3-235B-A22B-FP8 on vLLM.
    assert (vllm_host.name, vllm_host.sim.gpu_count, vllm_host.sim.gpu_total_mib) == ("demo-vllm", 4, 81559)
    assert vllm_host.sim.gpu_name == "NVIDIA H100 80GB HBM3"
    (qwen,) = vllm_host.services
    assert (qwen.engine, qwen.url) == (Engine.VLLM, "http://127.0.0.1:8000")
    assert [lc.name for lc in qwen.layouts] == ["TP4", "TP2 PP2", "TP4 EP", "TP2"]
    assert qwen.layout("TP4 EP").layout == Layout(tp=4, ep=4)  # --enable-expert-parallel: EP = TP x DP
    assert qwen.unit_for(qwen.layout("TP4 EP")) == "vllm-qwen3@tp4ep.service"
    assert config.host(None) is None and host.service(None) is service  # several hosts: --host picks one
    # demo-a and demo-b: one DeepSeek-V3 service over both, its head on demo-a.
    assert [(h.name, h.sim.gpu_count, h.sim.gpu_total_mib) for h in (head, worker)] == [
        ("demo-a", 8, 97887), ("demo-b", 8, 97887)]
    (ds3,) = head.services
    assert ds3.cluster.nodes == ("demo-a", "demo-b") and ds3.layout("TP16").nodes == 2
    assert worker.services == () or all(s.name == ds3.name for s in worker.services)


def test_packaged_model_config_is_verbatim() -> None:
    assert KIMI.read_bytes() == FIXTURE_KIMI.read_bytes()
    qwen = "Qwen--Qwen3-235B-A22B-FP8.json"
    assert (KIMI.parent / qwen).read_bytes() == (FIXTURE_KIMI.parent / qwen).read_bytes()


def test_repo_hosts_toml_describes_the_demo_cluster() -> None:
    repo, demo = load_config(REPO / "hosts.toml"), load_config(demo_config_path())
    assert repo.path == REPO / "hosts.toml"
    assert [h.name for h in repo.hosts] == ["demo", "demo-vllm", "demo-a", "demo-b"]
    # Same hosts and services; only the `line` fields differ between the two files.
    strip = _without_lines
    assert [strip(h) for h in repo.hosts] == [strip(h) for h in demo.hosts]
    assert repo.ui == UiConfig()


def _without_lines(value):
    """The value with every dataclass's `line` field set to None, however deep (services, nodes, peers)."""
    import dataclasses

    if isinstance(value, tuple):
        return tuple(_without_lines(v) for v in value)
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    changes = {f.name: _without_lines(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if "line" in changes:
        changes["line"] = None
    return dataclasses.replace(value, **changes)


def test_every_mapping_and_transport() -> None:
    config = load_config(FIXTURES / "all_mappings.toml")
    assert config.ui == UiConfig(theme="light", line_cap=2000, history_s=120, refresh_s=0.5, readonly=True,
                                 keys=(("host.layouts", "L"), ("app.quit", "ctrl+q")))
    node1 = config.host("gpu-node-1")
    assert (node1.address, node1.user, node1.port, node1.gpu_mem_gib) == ("192.0.2.10", "ops", 2222, 94.97)
    assert node1.identity == str(FIXTURES / "keys" / "id_ed25519")
    assert node1.known_hosts == str(Path("~/known_hosts_test").expanduser())
    assert node1.trust_on_first_use and node1.connect_timeout_s == 5.0 and node1.sim is None
    kimi = node1.service("kimi")
    assert (kimi.mapping, kimi.health_via, kimi.sudo, kimi.mem_fraction) == (UNIT_PER_LAYOUT, "ssh", True, 0.85)
    assert kimi.url == "http://127.0.0.1:30000"  # the trailing slash is dropped
    assert kimi.all_units() == ("sglang-k26-tp8.service", "sglang-k26-ep8.service", "sglang-k26-tp4ep2.service")
    assert [lc.layout for lc in kimi.layouts] == [Layout(tp=8), Layout(tp=8, ep=8), Layout(tp=4, ep=2)]
    assert [lc.line for lc in kimi.layouts] == [35, 39, 45]  # their [[layouts]] headers

    node2 = config.host("gpu-node-2")
    assert (node2.transport, node2.address, node2.gpus) == ("ssh", "gpu-node-2", "nvidia-smi")
    templated = node2.service(None)
    assert templated.mapping == TEMPLATE  # implied by `template`
    assert templated.all_units() == ("sglang-k26@tp8.service", "sglang-k26@pp8.service", "sglang-k26@tp4ep2.service")

    node3 = config.host("gpu-node-3")
    assert node3.address == "gpu-node-3"  # defaults to the table name
    env = node3.service("kimi")
    assert (env.mapping, env.env_file, env.env_var) == (ENV_FILE, "/etc/serve-console/sglang-k26.env",
                                                        "SERVE_CONSOLE_LAYOUT_ARGS")
    assert env.all_units() == ("sglang-k26.service",)
    dropin = node3.service("qwen")
    assert (dropin.engine, dropin.mapping, dropin.env_var) == (Engine.VLLM, DROP_IN, "LAYOUT_ARGS")
    assert [lc.name for lc in dropin.layouts] == ["TP2", "TP4 EP4"]

    local = config.host("workstation")
    assert (local.transport, local.gpus, local.address) == ("local", "nvml", None)
    assert local.service(None).engine == Engine.OPENAI

    sim = config.host("sim-a")
    assert sim.sim is not None and (sim.sim.gpu_count, sim.sim.time_scale) == (4, 0.05)
    assert (sim.sim.gpu_total_mib, sim.sim.gpu_name) == (81559, "NVIDIA H100 80GB HBM3")
    assert sim.gpu_count == 4 and sim.gpus == "sim"


def test_minimal_file_takes_the_defaults() -> None:
    config = load_config(FIXTURES / "minimal.toml")
    (host,) = config.hosts
    assert (host.transport, host.address, host.gpus, host.port, host.trust_on_first_use) == (
        "ssh", "gpu-node-1", "nvidia-smi", None, False)
    assert host.connect_timeout_s == 10.0 and host.record_cap_mib == 64.0
    # An SSH host's engine is probed through the connection by default (issue 10: never from here).
    assert host.services[0].health_via == "ssh" and host.services[0].model_config is None
    assert config.ui == UiConfig()


@pytest.mark.parametrize(("value", "why"), [("0.5", "must be 0 .no record. or at least 1"), ("-1", "> -1"),
                                           ('"big"', "")])
def test_a_bad_record_cap_names_its_line(tmp_path: Path, value: str, why: str) -> None:
    path = tmp_path / "hosts.toml"
    service = '[hosts.a.services.s]\nengine = "sglang"\nurl = "http://127.0.0.1:30000"\ntemplate = "s@.service"\nlayouts = ["TP8"]\n'
    path.write_text(f'[hosts.a]\ntransport = "local"\nrecord_cap_mib = {value}\n' + service)
    with pytest.raises(ConfigError, match=rf"hosts\.toml:3: hosts\.a\.record_cap_mib: .*{why}"):
        load_config(path)
    path.write_text('[hosts.a]\ntransport = "local"\nrecord_cap_mib = 0\n' + service)
    assert load_config(path).hosts[0].record_cap_mib == 0.0


def test_search_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    minimal = (FIXTURES / "minimal.toml").read_text()
    user_file = tmp_path / "user" / "hosts.toml"
    monkeypatch.setattr(config_loader, "user_config_path", lambda: user_file)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    with pytest.raises(ConfigError, match=r"^hosts\.toml: no config found .*--demo"):
        load_config()
    user_file.parent.mkdir()
    user_file.write_text(minimal)
    assert load_config().path == user_file
    (cwd / "hosts.toml").write_text(minimal)
    assert load_config().path == cwd / "hosts.toml"
    assert load_config(FIXTURES / "minimal.toml").path == FIXTURES / "minimal.toml"


def test_unreadable_paths(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml: cannot read: No such file"):
        load_config(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match=r": cannot read: Is a directory"):
        load_config(tmp_path)


def test_config_error_is_a_usage_error_with_exit_code_2() -> None:
    assert issubclass(ConfigError, UsageError) and ConfigError("f", 1, "m").exit_code == 2


SERVICE = """
[hosts.h.services.s]
engine = "sglang"
url = "http://127.0.0.1:30000"
template = "sglang@.service"
layouts = ["TP8"]
"""

# Each case: a file whose line marked `#<` is the one the error must name, and the message's tail.
# A case without a marker expects no line number.
BROKEN = {
    "syntax": ('[hosts.h\nx = 1\n', "TOML syntax: "),
    "syntax-at-end": ('[hosts.h]\nx = [1,\n', "TOML syntax: "),
    "empty": ("", "no hosts defined"),
    "comments-only": ("# nothing\n[console]\n", "no hosts defined"),
    "top-level-typo": ('host = 1 #<\n' + SERVICE, "host: unknown key (did you mean 'hosts'?)"),
    "host-typo": ('[hosts.h]\ntrasport = "ssh" #<\n' + SERVICE, "hosts.h.trasport: unknown key (did you mean 'transport'?)"),
    "service-typo": (SERVICE + 'egnine = "vllm" #<\n', "hosts.h.services.s.egnine: unknown key (did you mean 'engine'?)"),
    "port-type": ('[hosts.h]\nport = "22" #<\n' + SERVICE, "hosts.h.port: expected an integer, got a string ('22')"),
    "port-range": ('[hosts.h]\nport = 70000 #<\n' + SERVICE, "hosts.h.port: expected an integer >= 1 and <= 65535, got 70000"),
    "bool-is-not-int": ('[hosts.h]\ngpu_count = true #<\n' + SERVICE, "hosts.h.gpu_count: expected an integer, got a boolean (true)"),
    "host-not-table": ('hosts.h = 3 #<\n', "hosts.h: expected a table, got an integer (3)"),
    "no-services": ('[hosts.h] #<\naddress = "192.0.2.1"\n', "hosts.h.services: a host needs at least one"),
    "bad-host-name": ('[hosts."a b".services.s] #<\nengine = "sglang"\n', 'hosts."a b": host names use'),
    "transport": ('[hosts.h]\ntransport = "telnet" #<\n' + SERVICE, 'hosts.h.transport: expected one of "ssh", "local", "sim", got \'telnet\''),
    "address-option": ('[hosts.h]\naddress = "-oProxyCommand=x" #<\n' + SERVICE, "hosts.h.address: '-oProxyCommand=x' is not a host name"),
    "nvml-over-ssh": ('[hosts.h]\ngpus = "nvml" #<\n' + SERVICE, 'hosts.h.gpus: expected one of "nvidia-smi", "dcgm", "none"'),
    "sim-table-on-ssh": ('[hosts.h.sim] #<\ngpu_count = 2\n' + SERVICE, 'hosts.h.sim: only for transport = "sim"'),
    "ssh-key-on-local": ('[hosts.h]\ntransport = "local"\nuser = "x" #<\n' + SERVICE, 'hosts.h.user: only for transport = "ssh"'),
    "missing-engine": ('[hosts.h.services.s] #<\nurl = "http://127.0.0.1:1"\n', "hosts.h.services.s.engine: required key missing"),
    "engine-enum": (SERVICE.replace('"sglang"', '"tgi" #<'), 'hosts.h.services.s.engine: expected one of "sglang", "vllm", "openai"'),
    "mapping-enum": (SERVICE + 'mapping = "per-layout" #<\n', 'hosts.h.services.s.mapping: expected one of "unit-per-layout", "template", "env-file", "drop-in"'),
    "url-scheme": (SERVICE.replace("http://", "ftp://").replace(':30000"', ':30000" #<'), "hosts.h.services.s.url: expected an http:// or https:// URL"),
    "url-port": (SERVICE.replace(":30000", ":99999").replace(':99999"', ':99999" #<'), "hosts.h.services.s.url: "),
    "url-no-host": (SERVICE.replace("127.0.0.1:30000", "").replace('//"', '//" #<'), "hosts.h.services.s.url: no host in URL"),
    "template-grammar": (SERVICE.replace('"sglang@.service"', '"sglang.service" #<'), "hosts.h.services.s.template: 'sglang.service' is not a systemd unit name (NAME@.service"),
    "unit-suffix": ('[hosts.h.services.s]\nengine = "vllm"\nurl = "http://h:1"\nmapping = "drop-in"\nunit = "vllm" #<\nlayouts = ["TP1"]\n',
                    "hosts.h.services.s.unit: 'vllm' is not a systemd unit name"),
    "unit-space": ('[hosts.h.services.s]\nengine = "vllm"\nurl = "http://h:1"\nmapping = "drop-in"\nunit = "a b.service" #<\nlayouts = ["TP1"]\n',
                   "hosts.h.services.s.unit: 'a b.service' is not a systemd unit name"),
    "unit-dash": ('[hosts.h.services.s]\nengine = "vllm"\nurl = "http://h:1"\nmapping = "drop-in"\nunit = "-x.service" #<\nlayouts = ["TP1"]\n',
                  "hosts.h.services.s.unit: '-x.service' is not a systemd unit name"),
    "env-file-missing": ('[hosts.h.services.s] #<\nengine = "vllm"\nurl = "http://h:1"\nmapping = "env-file"\nunit = "v.service"\nlayouts = ["TP1"]\n',
                         "hosts.h.services.s.env_file: required key missing for mapping = 'env-file'"),
    "env-file-relative": ('[hosts.h.services.s]\nengine = "vllm"\nurl = "http://h:1"\nunit = "v.service"\nenv_file = "etc/v.env" #<\nlayouts = ["TP1"]\n',
                          "hosts.h.services.s.env_file: 'etc/v.env' is not an absolute path on the host"),
    "stray-template": ('[hosts.h.services.s]\nengine = "vllm"\nurl = "http://h:1"\nmapping = "drop-in"\nunit = "v.service"\ntemplate = "v@.service" #<\nlayouts = ["TP1"]\n',
                       "hosts.h.services.s.template: not used with mapping = 'drop-in'"),
    "per-layout-strings": ('[hosts.h.services.s]\nengine = "vllm"\nurl = "http://h:1"\nlayouts = [\n  "TP1",   #<\n]\n',
                           "hosts.h.services.s.layouts: layout 'TP1': mapping 'unit-per-layout' needs [[layouts]] tables"),
    "per-layout-no-unit": ('[hosts.h.services.s]\nengine = "vllm"\nurl = "http://h:1"\n[[hosts.h.services.s.layouts]]\nname = "TP1"\nunit = "a.service"\n'
                           '[[hosts.h.services.s.layouts]] #<\nname = "TP2"\n',
                           "hosts.h.services.s.layouts[1].unit: required key missing for mapping = 'unit-per-layout'"),
    "layout-unit-on-template": ('[hosts.h.services.s]\nengine = "vllm"\nurl = "http://h:1"\ntemplate = "v@.service"\n'
                                '[[hosts.h.services.s.layouts]]\nname = "TP1"\nunit = "v.service" #<\n',
                                "hosts.h.services.s.layouts[0].unit: a layout's own unit is only for mapping = 'unit-per-layout'"),
    "layout-key-typo": ('[hosts.h.services.s]\nengine = "vllm"\nurl = "http://h:1"\ntemplate = "v@.service"\n'
                        '[[hosts.h.services.s.layouts]]\nname = "TP1"\n[[hosts.h.services.s.layouts]]\nname = "TP2"\ntps = 2 #<\n',
                        "hosts.h.services.s.layouts[1].tps: unknown key (did you mean 'tp'?)"),
    "args-and-tp": ('[hosts.h.services.s]\nengine = "vllm"\nurl = "http://h:1"\ntemplate = "v@.service"\n'
                    '[[hosts.h.services.s.layouts]]\nname = "X"\ntp = 2 #<\nargs = "--tp-size 2"\n',
                    "hosts.h.services.s.layouts[0].tp: give either args or tp/ep/pp/dp keys, not both"),
    "layout-zero-tp": ('[hosts.h.services.s]\nengine = "vllm"\nurl = "http://h:1"\ntemplate = "v@.service"\n'
                       '[[hosts.h.services.s.layouts]]\nname = "X"\ntp = 0 #<\n',
                       "hosts.h.services.s.layouts[0].tp: expected an integer >= 1"),
    "layout-nameless": ('[hosts.h.services.s]\nengine = "vllm"\nurl = "http://h:1"\ntemplate = "v@.service"\n'
                        '[[hosts.h.services.s.layouts]] #<\nunit = "v.service"\n',
                        "hosts.h.services.s.layouts[0]: a layout needs a name"),
    "layout-name-escape": ('[hosts.h.services.s]\nengine = "vllm"\nurl = "http://h:1"\ntemplate = "v@.service"\n'
                           '[[hosts.h.services.s.layouts]] #<\nname = "fast\\u001b[31m"\ntp = 2\n',
                           "hosts.h.services.s.layouts: layout name 'fast\\x1b[31m' must be one line"),
    "duplicate-layout": (SERVICE.replace('["TP8"]', '[\n  "TP8",\n  "tp8",  #<\n]'), "hosts.h.services.s.layouts: duplicate layout 'tp8' (same as 'TP8')"),
    "duplicate-unit": ('[hosts.h.services.s]\nengine = "vllm"\nurl = "http://h:1"\n[[hosts.h.services.s.layouts]]\nname = "TP1"\nunit = "v.service"\n'
                       '[[hosts.h.services.s.layouts]] #<\nname = "TP2"\nunit = "v.service"\n',
                       "hosts.h.services.s.layouts: layout 'TP2' reuses unit 'v.service' of layout 'TP1'"),
    "empty-layouts": (SERVICE.replace('["TP8"]', '[] #<'), "hosts.h.services.s.layouts: expected a non-empty array"),
    "layout-not-string": (SERVICE.replace('["TP8"]', '[8] #<'), "hosts.h.services.s.layouts: layout 1: expected a string or a table, got 8"),
    "layout-gibberish": (SERVICE.replace('["TP8"]', '["bogus"] #<'), "hosts.h.services.s.layouts: "),
    "model-config-missing": (SERVICE + 'model_config = "no/such/config.json" #<\n', "hosts.h.services.s.model_config: cannot read "),
    "sim-needs-model": ('[hosts.h]\ntransport = "sim"\n' + SERVICE.replace("[hosts.h.services.s]", "[hosts.h.services.s] #<"),
                        "hosts.h.services.s.model_config: required key missing on a sim host"),
    "time-scale-twice": ('[hosts.h]\ntransport = "sim"\ntime_scale = 1.0\n[hosts.h.sim]\ntime_scale = 2.0 #<\n' + SERVICE,
                         "hosts.h.sim.time_scale: also set as hosts.h.time_scale; set it once"),
    "time-scale-nan": ('[hosts.h]\ntransport = "sim"\ntime_scale = nan #<\n' + SERVICE, "hosts.h.time_scale: expected a finite number > 0"),
    "mem-fraction": (SERVICE + "mem_fraction = 1.5 #<\n", "hosts.h.services.s.mem_fraction: expected a finite number > 0 and <= 1"),
    "health-via": (SERVICE + 'health_via = "tunnel" #<\n', 'hosts.h.services.s.health_via: expected one of "direct", "ssh"'),
    "sudo-type": (SERVICE + 'sudo = "yes" #<\n', "hosts.h.services.s.sudo: expected true or false, got a string ('yes')"),
    "duplicate-url": (SERVICE + '[hosts.h.services.t]\nengine = "vllm"\nurl = "http://127.0.0.1:30000/" #<\ntemplate = "v@.service"\nlayouts = ["TP1"]\n',
                      "hosts.h.services.t.url: same URL as service 's'"),
    "console-typo": ('[console]\nthem = "dark" #<\n' + SERVICE, "console.them: unknown key (did you mean 'theme'?)"),
    "line-cap": ('[console]\nline_cap = 5 #<\n' + SERVICE, "console.line_cap: expected an integer >= 100"),
    "key-spec": ('[console.keys]\n"host.layouts" = "" #<\n' + SERVICE, 'console.keys."host.layouts": \'\' is not a key'),
    "invalid-utf8": (b'[hosts.h]\n#<\n\xff\n', "not valid UTF-8 (byte 0xff at column 1)"),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_file_is_one_line_naming_file_and_line(name: str, tmp_path: Path) -> None:
    source, expected = BROKEN[name]
    data = source.encode() if isinstance(source, str) else source
    lines = data.split(b"\n")
    marked = [i for i, line in enumerate(lines, start=1) if b"#<" in line]
    if isinstance(source, bytes):  # the marker sits on its own line, just above the bad byte
        marked = [m + 1 for m in marked]
    path = tmp_path / "hosts.toml"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "\n" not in message
    where = f"{path}:{marked[0]}: " if marked else f"{path}: "
    if name.startswith("syntax"):  # tomli names the line itself; the marker is not parsed
        assert message.startswith(f"{path}:") and expected in message
        assert caught.value.line == (1 if name == "syntax" else 3)
        return
    assert message.startswith(where + expected), message


def test_layout_error_message_is_passed_through(tmp_path: Path) -> None:
    path = tmp_path / "hosts.toml"
    path.write_text(SERVICE.replace('["TP8"]', '["TP4 EP3"]'))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}:6: hosts.h.services.s.layouts: 'TP4 EP3': ")
    assert "3" in str(caught.value).split("'TP4 EP3': ", 1)[1]


@pytest.mark.parametrize(("content", "expected"), [
    (b"{not json", "is not JSON: "),
    (b"[1, 2]", "is not a config.json (a JSON object)"),
    (b"\xff\xfe", "is not JSON: "),
])
def test_model_config_must_be_a_json_object(tmp_path: Path, content: bytes, expected: str) -> None:
    (tmp_path / "config.json").write_bytes(content)
    path = tmp_path / "hosts.toml"
    path.write_text(SERVICE + 'model_config = "config.json"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}:7: hosts.h.services.s.model_config: ")
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_config_values_are_frozen() -> None:
    config: ConsoleConfig = load_config(demo_config_path())
    with pytest.raises(AttributeError):
        config.hosts[0].name = "x"  # type: ignore[misc]


def test_locator_finds_keys_tables_and_array_elements() -> None:
    text = textwrap.dedent('''\
        [hosts.h]
        note = """
        port = 1
        """
        port = 2
        "quoted key".inner = 3
        [[hosts.h.services.s.layouts]]
        name = "A"
        [[hosts.h.services.s.layouts]]
        name = "B"
        [hosts.h.services.s]
        layouts = [
          "TP8",
          "EP8",
        ]
    ''')
    locator = KeyLocator(text)
    assert locator.line(("hosts", "h")) == 1
    assert locator.line(("hosts", "h", "port")) == 5  # not the line inside the string
    assert locator.line(("hosts", "h", "quoted key", "inner")) == 6
    assert locator.line(("hosts", "h", "services", "s", "layouts", 1, "name")) == 10
    assert locator.line(("hosts", "h", "services", "s", "layouts", 0)) == 7
    assert locator.line(("hosts", "h", "missing", "deeper")) == 1  # falls back to the table
    assert locator.line(("nowhere",)) is None
    assert locator.item_line(("hosts", "h", "services", "s", "layouts"), "EP8") == 14
    assert dotted(("hosts", "a b", "layouts", 2, "unit")) == 'hosts."a b".layouts[2].unit'


def test_commented_real_host_blocks_of_the_example_are_valid(tmp_path: Path) -> None:
    """Uncommenting the example's real-host blocks gives a loadable file with every mapping."""
    text = (REPO / "hosts.toml").read_text()
    head, marker, tail = text.partition("# --- A real GPU host")
    assert marker, "the example lost its real-host section"
    uncommented = []
    for line in (marker + tail).splitlines():
        if line.startswith("# ---") or line.startswith("# # ") or line.strip() == "#":
            uncommented.append("")
        else:
            uncommented.append(line.removeprefix("# "))
    for folder in ("console/sim/models", "models/kimi-k2.6"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "console/sim/models" / KIMI.name).write_bytes(KIMI.read_bytes())
    qwen = REPO / "console/sim/models/Qwen--Qwen3-235B-A22B-FP8.json"
    (tmp_path / "console/sim/models" / qwen.name).write_bytes(qwen.read_bytes())
    ds3 = REPO / "console/sim/models/deepseek-ai--DeepSeek-V3.json"
    (tmp_path / "console/sim/models" / ds3.name).write_bytes(ds3.read_bytes())
    (tmp_path / "models/kimi-k2.6/config.json").write_bytes(KIMI.read_bytes())
    (tmp_path / "hosts.toml").write_text(head + "\n".join(uncommented) + "\n")
    config = load_config(tmp_path / "hosts.toml")
    names = ["demo", "demo-vllm", "demo-a", "demo-b", "gpu-node-1", "gpu-node-2", "gpu-node-3"]
    assert [h.name for h in config.hosts] == names
    mappings = {s.mapping for h in config.hosts for s in h.services}
    assert mappings == {UNIT_PER_LAYOUT, TEMPLATE, ENV_FILE, DROP_IN}
    seed = config.host("gpu-node-1").service("kimi-k2.6")
    assert seed.unit_for(seed.layout("TP4 EP2")) == "sglang-k26-tp4ep2.service"
    assert (seed.health_via, seed.sudo) == ("ssh", True)
    assert config.host("gpu-node-3").service("qwen3-30b").engine == Engine.VLLM
    assert config.host("gpu-node-3").gpus == "dcgm"
    assert config.fleet is not None and config.fleet.prometheus == "http://prometheus.example:9090"
