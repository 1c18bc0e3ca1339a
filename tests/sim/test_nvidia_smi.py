"""The nvidia-smi stand-in: nvidia-smi's CSV, its errors and its loops, under plain python3 too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from console.sim.ledger import ProcLedger, ensure_inventory

REPO = Path(__file__).resolve().parents[2]
QUERY = "index,uuid,name,memory.total,memory.used,utilization.gpu,temperature.gpu,pci.bus_id"


def smi(ledger: Path, *args: str, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SERVE_CONSOLE_SIM_LEDGER=str(ledger), PYTHONPATH=str(REPO))
    return subprocess.run([python, "-m", "console.sim.nvidia_smi", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=20)


@pytest.fixture
def ledger(tmp_path: Path):
    ensure_inventory(tmp_path, 8, 97887, host="gpu-node-1")
    holder = ProcLedger(tmp_path, name="sglang::scheduler")  # this test process stands in for an engine
    holder.set(2, used_mib=93811, util_pct=41)
    holder.set(3, used_mib=512, util_pct=0)
    holder.flush()
    yield tmp_path
    holder.remove()


def test_query_gpu_csv_noheader_nounits(ledger: Path) -> None:
    out = smi(ledger, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits")
    assert out.returncode == 0, out.stdout
    rows = [line.split(", ") for line in out.stdout.splitlines()]
    assert len(rows) == 8 and all(len(r) == 8 for r in rows)
    index, uuid, name, total, used, util, temp, bus = rows[2]
    assert (index, total, used, util) == ("2", "97887", "93811", "41")
    assert uuid.startswith("GPU-") and name == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert 25 < int(temp) < 90 and bus == "00000000:52:00.0"
    assert rows[0][4] == "0"


def test_csv_with_units_header_and_subset(ledger: Path) -> None:
    out = smi(ledger, "--query-gpu=memory.used,index,utilization.gpu,memory.total", "--format=csv", "-i", "2,3")
    assert out.stdout.splitlines() == [
        "memory.used [MiB], index, utilization.gpu [%], memory.total [MiB]",
        "93811 MiB, 2, 41 %, 97887 MiB",
        "512 MiB, 3, 0 %, 97887 MiB",
    ]
    free = smi(ledger, "--query-gpu", "memory.free,memory.used", "--format=csv,noheader,nounits", "-i", "0")
    assert int(free.stdout.split(", ")[0]) < 97887


def test_compute_apps(ledger: Path) -> None:
    out = smi(ledger, "--query-compute-apps=pid,gpu_uuid,used_memory,process_name", "--format=csv")
    lines = out.stdout.splitlines()
    assert lines[0] == "pid, gpu_uuid, used_gpu_memory [MiB], process_name"
    assert [line.split(", ")[0] for line in lines[1:]] == [str(os.getpid())] * 2
    assert lines[1].endswith(", 93811 MiB, sglang::scheduler")
    gpus = smi(ledger, "--query-gpu=index,uuid", "--format=csv,noheader").stdout.splitlines()
    assert lines[1].split(", ")[1] == gpus[2].split(", ")[1]


def test_unknown_field_is_nvidia_smis_error(ledger: Path) -> None:
    out = smi(ledger, "--query-gpu=index,cuda_version", "--format=csv")
    assert out.returncode == 2
    assert out.stdout == 'Field "cuda_version" is not a valid field to query.\n\n'


def test_no_inventory_means_no_driver(tmp_path: Path) -> None:
    out = smi(tmp_path / "empty", "--query-gpu=index", "--format=csv")
    assert out.returncode == 9 and "couldn't communicate with the NVIDIA driver" in out.stdout


def test_loop_prints_one_sample_per_interval_and_flushes(ledger: Path) -> None:
    env = dict(os.environ, SERVE_CONSOLE_SIM_LEDGER=str(ledger), PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "console.sim.nvidia_smi", "--query-gpu=index,memory.used",
                             "--format=csv", "-lms", "50"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().rstrip("\n") for _ in range(1 + 8 * 3)]
    finally:
        proc.terminate()
        proc.wait(timeout=5)
    assert lines[0] == "index, memory.used [MiB]"  # the header once, then samples only
    assert lines[1:].count("2, 93811 MiB") == 3


def test_bare_table_and_list(ledger: Path) -> None:
    table = smi(ledger).stdout
    assert "NVIDIA-SMI" in table and "93811MiB /  97887MiB" in table and "sglang::scheduler" in table
    widths = {len(line) for line in table.splitlines()[1:] if line.startswith(("|", "+"))}
    assert widths == {91}
    listing = smi(ledger, "-L").stdout.splitlines()
    assert len(listing) == 8 and listing[0].startswith("GPU 0: NVIDIA RTX PRO 6000")


@pytest.mark.skipif(not shutil.which("python3"), reason="no system python3")
def test_runs_under_plain_python3_without_third_party_packages(ledger: Path) -> None:
    out = smi(ledger, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
              python=shutil.which("python3") or "python3")
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 8, out.stderr


def _shape(text: str) -> list[tuple[int, str, int | None]]:
    """Each line's indent, label and colon column: the report's shape without its figures."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("GPU "):
            continue
        label = line.split(":", 1)[0].rstrip() if " : " in line else line.rstrip()
        out.append((len(line) - len(line.lstrip()), label.strip(), line.find(" : ") if " : " in line else None))
    return out


def test_query_performance_power_clock_has_the_real_reports_shape(ledger: Path) -> None:
    out = smi(ledger, "-q", "-d", "PERFORMANCE,POWER,CLOCK", "-i", "2")
    assert out.returncode == 0, out.stdout
    real = (REPO / "tests" / "fixtures" / "nvidia-smi" / "q-a10-550-sections.txt").read_text()
    assert _shape(out.stdout) == _shape(real)  # labels, nesting and the colon's column, line for line
    assert "GPU 00000000:" in out.stdout and "Attached GPUs                             : 8" in out.stdout
    busy = out.stdout.split("Clocks Event Reasons", 1)[1]
    assert busy.split("\n")[1].split(":")[1].strip() == "Not Active"  # GPU 2 runs kernels: not idle


def test_query_of_an_idle_gpu_says_idle_active_and_p8(ledger: Path) -> None:
    out = smi(ledger, "-q", "--display=PERFORMANCE", "-i", "3")
    assert out.returncode == 0, out.stdout
    assert "Performance State                     : P0" in out.stdout  # it holds memory
    assert "        Idle                              : Active" in out.stdout
    assert "Power Readings" not in out.stdout and "Max Clocks" not in out.stdout
    bad = smi(ledger, "-q", "-d", "NOPE")
    assert bad.returncode == 2 and 'Invalid display type "NOPE"' in bad.stdout
