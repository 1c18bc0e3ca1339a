"""gpus = "dcgm" on a real SSH host: a dcgm-exporter stand-in listens on the test host's own loopback
(:9400, its own network namespace, so unreachable from here), and the console reads it through the
port forward of its one OpenSSH connection."""

from __future__ import annotations

import pytest
from remote_helpers import bed_host_config, wait_until

from console.domain.triage.xid import xid_findings
from console.hosts.remote import build_remote_host

pytestmark = pytest.mark.integration

STANDIN = "/opt/dcgm-standin/exporter.py"
UNIT = "dcgm-standin"
#: dcgm-exporter's answer for two GPUs, the second with Xid 79, served by the host's python3.
EXPORTER = '''\
import http.server

BODY = """\\
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-aa",modelName="NVIDIA H100 80GB HBM3",Hostname="tb1"} 77000
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-bb",modelName="NVIDIA H100 80GB HBM3",Hostname="tb1"} 559
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-aa",modelName="NVIDIA H100 80GB HBM3",Hostname="tb1"} 4559
DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-bb",modelName="NVIDIA H100 80GB HBM3",Hostname="tb1"} 81000
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-aa"} 71
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-bb"} 33
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-aa"} 0
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-bb"} 79
""".encode()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        if self.path == "/metrics":
            self.wfile.write(BODY)


http.server.HTTPServer(("127.0.0.1", 9400), Handler).serve_forever()
'''


async def test_dcgm_through_the_ssh_connection(clean_testbed):
    bed = clean_testbed
    bed.write_file("tb1", STANDIN, EXPORTER)
    bed.ssh("tb1", f"systemd-run --unit={UNIT} --quiet /usr/bin/python3 {STANDIN}")
    host = build_remote_host(bed_host_config(bed, "tb1", gpus="dcgm"))
    try:
        async def sampled():
            snapshot = await host.gpus.sample()
            return snapshot if snapshot.gpus else None

        snapshot = await wait_until(sampled, 20, "the stand-in's GPUs through the forward")
        assert snapshot.error is None
        assert [(g.index, g.used_mib, g.total_mib, g.temp_c) for g in snapshot.gpus] == [
            (0, 77000, 81559, 71), (1, 559, 81559, 33)]
        (finding,) = xid_findings(snapshot)
        assert "GPU 1 reported Xid 79" in finding.summary
        bed.ssh("tb1", f"systemctl stop {UNIT}")
        gone = await host.gpus.sample()
        assert gone.gpus == () and "dcgm-exporter at http://127.0.0.1:9400/metrics on tb1" in (gone.error or "")
    finally:
        await host.close()
        bed.ssh("tb1", f"systemctl stop {UNIT} 2>/dev/null; rm -rf /opt/dcgm-standin", check=False)
