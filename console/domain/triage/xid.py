"""A GPU's last Xid error (from dcgm-exporter) as a finding, named from NVIDIA's Xid catalogue.

An Xid is the driver's report of a GPU fault. dcgm-exporter's `DCGM_FI_DEV_XID_ERRORS` holds the last
one seen per GPU (0: none). It is a host finding, not a line of the engine's log, so it is not fatal
by itself; some Xids (79, 95, 48) mean the GPU needs a reset or a drain before it serves again.
"""

from __future__ import annotations

from console.domain.values import Finding, FindingClass, GpuSnapshot

#: Xid -> what it means (NVIDIA's "Xid Errors" catalogue), for the common ones on datacenter GPUs.
XID_MEANINGS = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup after an earlier error",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}
#: Xids after which the GPU needs a reset (or the host a drain) before it serves again.
NEEDS_RESET = frozenset({48, 62, 64, 74, 79, 95, 119, 120})


def xid_findings(snapshot: GpuSnapshot | None) -> list[Finding]:
    """One finding per GPU whose last Xid is not 0, in GPU order."""
    if snapshot is None:
        return []
    out = []
    for gpu in snapshot.gpus:
        if not gpu.xid:
            continue
        meaning = XID_MEANINGS.get(gpu.xid, "see NVIDIA's Xid catalogue")
        advice = "; the GPU needs a reset before it serves again" if gpu.xid in NEEDS_RESET else ""
        out.append(Finding(
            cls=FindingClass.GPU_XID,
            line=f'DCGM_FI_DEV_XID_ERRORS{{gpu="{gpu.index}"}} {gpu.xid}',
            summary=f"GPU {gpu.index} reported Xid {gpu.xid} ({meaning}){advice}",
            rank=None,
            fatal=False,
            ts=snapshot.taken_at,
        ))
    return out
