"""Incident bundles (docs/bundle.md): a failed switch writes one; `triage` of it names the live cause;
`replay --json` yields its timeline in time order; its secrets are redacted; `--redact-hosts` makes a copy
for sharing; a file that is not a whole bundle is one line and exit 2."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from headless_cli import cli, demo_env, json_lines  # noqa: F401 (demo_env is a fixture)

from console.cli import main
from console.ops.bundle import FORMAT, read_bundle
from console.ops.bundle.fileformat import write_records

FIXTURE = Path(__file__).parent.parent / "fixtures" / "bundles" / "demo-tp4ep2-oom.jsonl.gz"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_triage_of_the_demo_bundle_names_cuda_oom_on_gpu_2(capsys) -> None:
    code, out, _ = run_cli(capsys, "triage", "--json", str(FIXTURE))
    assert code == 1
    top = json.loads(out.splitlines()[0])
    assert top["decisive"] and (top["class"], top["gpu"], top["rank"]) == ("cuda_oom", 2, "TP2 EP1")
    live = read_bundle(FIXTURE).verdict()  # what the console said when it happened
    assert live["failure"]["class"] == top["class"] and live["failure"]["gpu"] == top["gpu"]
    code, out, _ = run_cli(capsys, "triage", str(FIXTURE))
    assert code == 1 and out.splitlines()[1].startswith("cuda_oom")
    assert "the console said cuda_oom" in out.splitlines()[0]


def test_replay_json_yields_the_timeline_in_time_order(capsys) -> None:
    code, out, _ = run_cli(capsys, "replay", "--json", str(FIXTURE))
    assert code == 0
    records = [json.loads(line) for line in out.splitlines()]
    stamps = [r["ts"] for r in records]
    assert stamps == sorted(stamps)
    assert {"journal", "unit_state", "switch", "verdict", "card", "evidence"} <= {r["record"] for r in records}
    kinds = [r["record"] for r in records]
    oom = next(i for i, r in enumerate(records) if r["record"] == "journal" and "CUDA out of memory" in r["message"])
    verdict = kinds.index("verdict")
    back = next(i for i, r in enumerate(records) if r["record"] == "switch" and r["event"]["event"] == "step"
                and r["event"]["rollback"] and r["event"]["step"] == "http-ready")
    assert oom < verdict < back  # the OOM, then the console's verdict, then EP8 ready again
    assert records[verdict]["result"]["rollback"]["outcome"] == "ready"
    card = records[kinds.index("card")]
    assert card["headline"].startswith("CUDA OOM · GPU 2 · tried 672 MiB")
    code, out, _ = run_cli(capsys, "replay", str(FIXTURE))  # the plain face ends with the card as it was
    assert code == 0 and "failure card: CUDA OOM · GPU 2" in out and "\x1b" not in out


def test_a_failed_switch_writes_a_bundle_named_in_its_result_and_card(demo_env) -> None:  # noqa: F811
    cwd, env = demo_env
    assert cli(cwd, env, "switch", "EP8", "--json").returncode == 0
    run = cli(cwd, env, "switch", "TP4EP2", "--force", "--json")
    assert run.returncode == 1, run.stderr
    result = json_lines(run.stdout)[-1]
    assert result["outcome"] == "failed" and result["rollback"]["outcome"] == "ready"
    bundle = read_bundle(Path(result["bundle"]))
    assert bundle.header["incident"]["kind"] == "cuda_oom" and bundle.header["evidence"] == result["evidence"]
    assert bundle.verdict()["bundle"] == result["bundle"]
    card = next(r for r in bundle.timeline if r["record"] == "card")
    assert {"label": "bundle", "value": result["bundle"], "tone": ""} in card["rows"]
    assert bundle.evidence_files  # the evidence folder's parts travel inside
    units = {r["unit"] for r in bundle.timeline if r["record"] == "journal"}
    assert {"sglang-k26@ep8.service", "sglang-k26@tp4ep2.service"} <= units  # before and after, every unit
    triage = cli(cwd, env, "triage", "--json", result["bundle"])
    assert triage.returncode == 1 and json_lines(triage.stdout)[0]["class"] == "cuda_oom"
    human = cli(cwd, env, "switch", "TP4EP2", "--force")
    assert "  bundle: " in human.stdout


SECRETS = ("sk-live-0123456789", "hf_abcdefghijklmnopqrstuvwx", "Zm9vOmJhcg==")


def test_a_bundles_secrets_are_redacted(tmp_path) -> None:
    path = tmp_path / "b.jsonl.gz"
    journal = {"record": "journal", "ts": 1.0, "node": "n", "unit": "u",
               "message": f"server_args=ServerArgs(api_key='{SECRETS[0]}', hf_token='{SECRETS[1]}')"}
    event = {"record": "switch", "ts": 2.0, "event": {"event": "step", "detail": f"--api-key {SECRETS[0]}"}}
    card = {"record": "card", "ts": 3.0, "headline": "x", "rows": [{"label": "", "value": f"Authorization: Basic {SECRETS[2]}"}]}
    text = {"record": "evidence_file", "file": "stacks-n.txt", "text": f"=== pid 1: python --api-key={SECRETS[0]}\n"}
    write_records(path, {"host": "n", "incident": {"reason": f"HF_TOKEN={SECRETS[1]}"}}, [journal, event, card, text])
    raw = gzip.decompress(path.read_bytes()).decode()
    assert not any(secret in raw for secret in SECRETS), raw
    bundle = read_bundle(path)
    assert "api_key='***'" in bundle.timeline[0]["message"] and "***" in bundle.evidence_files["stacks-n.txt"]
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_redact_hosts_writes_a_copy_without_the_hosts_names(tmp_path, capsys) -> None:
    out = tmp_path / "shared.jsonl.gz"
    code, said, _ = run_cli(capsys, "replay", "--redact-hosts", "-o", str(out), str(FIXTURE))
    assert code == 0 and said.startswith(str(out))
    copy = read_bundle(out)
    assert copy.header["host"] == "host-1" and copy.header["hosts_redacted"]
    assert {r.get("node") for r in copy.timeline if "node" in r} == {"host-1"}
    assert '"demo"' not in gzip.decompress(out.read_bytes()).decode()
    code, said, _ = run_cli(capsys, "triage", "--json", str(out))  # still the same story
    assert code == 1 and json.loads(said.splitlines()[0])["class"] == "cuda_oom"


def _gz(path: Path, text: str) -> Path:
    path.write_bytes(gzip.compress(text.encode()))
    return path


@pytest.mark.parametrize("name, content, says", [
    ("plain.txt", None, "not a serve-console bundle"),
    ("junk.gz", "not json\n", ":1: not a JSON line of a bundle"),
    ("noheader.gz", '{"record": "journal", "ts": 1}\n', ":1: not a serve-console bundle"),
    ("future.gz", '{"record": "header", "format": "serve-console-bundle/9"}\n', "bundle format"),
    ("cut.gz", json.dumps({"record": "header", "format": FORMAT}) + "\n", "no end line: it was cut short"),
])  # fmt: skip
def test_a_bad_bundle_is_one_line_and_exit_2(tmp_path, capsys, name, content, says) -> None:
    path = tmp_path / name
    if content is None:
        path.write_text("a log, not a bundle\n")
    else:
        _gz(path, content)
    code, out, err = run_cli(capsys, "replay", "--json", str(path))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"serve-console: {path}") and says in err, err
    if content is not None:  # triage reads a gzip'd file as a bundle, and says the same
        assert run_cli(capsys, "triage", str(path))[0] == 2


class _Services:
    """A host's journal and states, as a bundle reads them: entries at the times given."""

    def __init__(self, stamps: list[float]) -> None:
        self.stamps = stamps

    async def journal(self, unit, *, after_cursor=None, follow=True, lines=None):
        from console.domain.values import JournalEntry

        for n, ts in enumerate(self.stamps):
            yield JournalEntry(cursor=str(n), ts=ts, unit=unit, message=f"line at {ts:.0f}")

    async def state(self, unit):
        raise OSError("no answer")  # a state that cannot be read is written down as such


async def test_the_journal_window_comes_from_the_hosts_config(tmp_path) -> None:
    import dataclasses
    import time
    from types import SimpleNamespace

    from console.config import demo_config_path, load_config
    from console.ops.bundle import Incident, write_bundle

    demo = load_config(demo_config_path()).hosts[0]
    service = demo.services[0]
    verdict = time.time() - 300
    stamps = [verdict - 700, verdict - 500, verdict + 60, verdict + 200]
    for before_s, after_s, kept in ((600.0, 120.0, [verdict - 500, verdict + 60]), (100.0, 30.0, [])):
        cfg = dataclasses.replace(demo, bundle_before_s=before_s, bundle_after_s=after_s)
        host = SimpleNamespace(name=cfg.name, config=cfg, services=_Services(stamps))
        path = tmp_path / f"{before_s}.jsonl.gz"
        incident = Incident(kind="cuda_oom", reason="r", unit=None, started_at=verdict - 5, verdict_at=verdict)
        await write_bundle(host, service, incident, path, events=[], result={}, card=[], headline="h",
                           evidence=None, before_s=cfg.bundle_before_s, after_s=cfg.bundle_after_s)
        bundle = read_bundle(path)
        journal = {r["ts"] for r in bundle.timeline if r["record"] == "journal"}
        assert journal == set(kept) if kept else not journal
        assert bundle.header["window"]["before_s"] == before_s
        states = [r for r in bundle.timeline if r["record"] == "unit_state"]
        assert states and all(r["error"] == "no answer" for r in states)


def test_the_window_is_read_from_hosts_toml(tmp_path) -> None:
    from console.config import load_config
    from console.errors import ConsoleError

    path = tmp_path / "hosts.toml"
    minimal = (Path(__file__).parent.parent / "fixtures" / "configs" / "minimal.toml").read_text()
    path.write_text("[hosts.gpu-node-1]\nbundle_before_s = 1200\n" + minimal)
    host = load_config(path).hosts[0]
    assert (host.bundle_before_s, host.bundle_after_s) == (1200.0, 120.0)
    path.write_text(path.read_text().replace("1200", "-1"))
    with pytest.raises(ConsoleError, match="bundle_before_s"):
        load_config(path)
