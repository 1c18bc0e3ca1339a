"""Signatures of crashes and of the host: signals, aborts, shared memory, RAM, disk, GPU faults, systemd.

A process that dies of a signal or an abort prints no Python exception to read, so these readers
name the death itself: `Fatal Python error: Segmentation fault`, absl's `*** SIGSEGV received`, a
C++ `terminate called after throwing`, a worker that `died, exit code: -6`, systemd's exit status.
"""

from __future__ import annotations

import re

from console.domain.triage.signatures import Reading, around, clip
from console.domain.values import FindingClass

_UNIT = r"(?P<unit>[\w@.:\\-]{1,200}\.(?:service|scope|socket))"
_MAIN_EXITED = re.compile(_UNIT + r": Main process exited, code=(?P<code>\w+), status=(?P<status>[^\s,]+)")
_FAILED_RESULT = re.compile(r"(?:" + _UNIT + r": )?Failed with result '(?P<result>[\w-]{1,40})'")
_UNIT_PREFIX = re.compile(_UNIT + ": ")
_KERNEL_OOM = re.compile(r"Out of memory: Killed process (?P<pid>\d+) \((?P<comm>[^)]{0,64})\)")
_FATAL_PYTHON = re.compile(r"Fatal Python error: (?P<what>[^\n]{0,160})")
_SIGNAL = re.compile(r"\bSIG(?P<name>[A-Z]{2,6})\b")
_TERMINATE = re.compile(r"terminate called after throwing an instance of '(?P<type>[^']{1,120})'")
_WORKER_DIED = re.compile(r"(?P<who>Worker[^\n]{0,80}?) died, exit code: (?P<code>-?\d+)")
_XID = re.compile(r"Xid \((?P<pci>[^)]{1,40})\): (?P<xid>\d+)")
_KILLED_LINE = re.compile(r"(?:^|\s)(?:\d+ )?Killed(?:\s|$)")
#: A shell's bare `Killed`: a SIGKILL from anyone. Usually the kernel's OOM killer, but SGLang also
#: kills its own process tree after a failed start, so an earlier fatal finding explains it (decisive.py).
BARE_KILL_SUMMARY = "Killed (SIGKILL, usually the kernel's OOM killer: host RAM)"
#: Signals whose death is a crash; TERM, INT, HUP and QUIT are someone stopping the process.
_STOP_SIGNALS = frozenset({"TERM", "INT", "HUP", "QUIT"})


def shm_exhausted(text: str, rank: str | None) -> Reading | None:
    """/dev/shm is too small or not writable (docker's 64 MB default): a bus error or NCCL's segment."""
    if "Bus error" in text or "bus error" in text or "SIGBUS" in text:
        return Reading(f"Bus error: shared memory (/dev/shm) exhausted: {clip(text, 100)}")
    if "shared memory" in text or "/dev/shm" in text:
        if "Error" in text or "error" in text or "No space left" in text or "insufficient" in text:
            return Reading(f"Shared memory (/dev/shm) exhausted or not writable: {clip(text, 110)}")
    return None


def segfault(text: str, rank: str | None) -> Reading:
    """A segmentation fault, however it was reported."""
    if "Fatal Python error" in text:
        return Reading("Segmentation fault (Fatal Python error): native code crashed")
    if "SIGSEGV" in text:
        return Reading(f"Segmentation fault (SIGSEGV): {clip(text, 110)}")
    return Reading(f"Segmentation fault: {clip(text, 120)}")


def host_oom(text: str, rank: str | None) -> Reading | None:
    """The kernel's OOM killer, a bare `Killed`, or a RAM allocation that failed."""
    m = _KERNEL_OOM.search(text)
    if m:
        return Reading(f"Kernel OOM killer killed process {m['pid']} ({clip(m['comm'], 64)}): host RAM, not GPU")
    if "OOM killer" in text or "oom-kill" in text:
        return Reading("A process was killed by the kernel's OOM killer (host RAM, not GPU)")
    if "Killed" in text:
        return Reading(BARE_KILL_SUMMARY) if _KILLED_LINE.search(
            text[:200]) and len(text) < 200 else None
    if "memory pressure (OOM)" in text or "memory usage threshold" in text:
        return Reading("Ray's memory monitor killed workers: host RAM crossed its threshold (not GPU memory)")
    if "exit code 137" in text or "exitcode: 137" in text:
        return Reading("Exited 137 (SIGKILL, usually the OOM killer: host RAM)")
    return Reading(f"Host RAM allocation failed: {clip(text, 120)}")


def disk_full(text: str, rank: str | None) -> Reading | None:
    """No space left on a disk (on /dev/shm it is shared memory instead)."""
    if "/dev/shm" in text or "shm" in text.split("No space", 1)[-1][:80]:
        return None
    return Reading(f"Disk full: {clip(text, 130)}")


def gpu_xid(text: str, rank: str | None) -> Reading:
    """The GPU reported a hardware or driver fault."""
    m = _XID.search(text)
    if m:
        return Reading(f"GPU fault: Xid {m['xid']} on {clip(m['pci'], 40)}")
    return Reading(f"GPU hardware error: {clip(text, 130)}")


def fatal_end(text: str, rank: str | None) -> Reading | None:
    """A death no Python exception explains: a fatal Python error, an abort, a signal, a dead worker."""
    m = _FATAL_PYTHON.search(text)
    if m:
        what = m["what"].strip()
        if "Segmentation fault" in what:
            return Reading(f"Fatal Python error: {clip(what, 100)}", cls=FindingClass.SEGFAULT)
        if "Bus error" in what:
            return Reading(f"Fatal Python error: {clip(what, 100)} (shared memory exhausted?)",
                           cls=FindingClass.SHM_EXHAUSTED)
        return Reading(f"Fatal Python error: {clip(what, 140)}")
    m = _TERMINATE.search(text)
    if m:
        what = text.split("what():", 1)[1].strip() if "what():" in text else ""
        return Reading(f"C++ exception {clip(m['type'], 60)}" + (f": {clip(what, 120)}" if what else ""))
    if "what():" in text:
        return Reading(f"C++ exception: {clip(text.split('what():', 1)[1], 140)}")
    m = _WORKER_DIED.search(text)
    if m:
        if m["code"] in ("-15", "-2"):  # SIGTERM, SIGINT: stopped, by a stop or by the engine's own shutdown
            return Reading(f"{clip(m['who'], 60)} stopped by a signal (exit code {m['code']})", fatal=False)
        return Reading(f"{clip(m['who'], 60)} died, exit code {m['code']}")
    signal = _SIGNAL.search(text)
    if signal and "received" in text:
        name = signal["name"]
        if name == "SEGV":
            return Reading(f"SIGSEGV received: {clip(text, 100)}", cls=FindingClass.SEGFAULT)
        if name == "BUS":
            return Reading(f"SIGBUS received: {clip(text, 100)}", cls=FindingClass.SHM_EXHAUSTED)
        if name in _STOP_SIGNALS:
            return None
        return Reading(f"Signal SIG{name} received: {clip(text, 100)}")
    if "core dumped" in text or "Aborted" in text:
        return Reading(f"The process aborted: {clip(text, 120)}") if len(text) < 300 else None
    return None


def unit_failed(text: str, rank: str | None) -> Reading | None:
    """systemd's lines about the unit's death (an exit status, a signal, a start limit)."""
    m = _MAIN_EXITED.search(around(text, ": Main process exited"))
    if m:
        code, status = m["code"], clip(m["status"], 40)
        if code == "exited" and status.startswith("0"):
            return None
        if code == "killed":
            stopped = status.split("/")[-1] in ("TERM", "INT")
            return Reading(f"{m['unit']}: main process killed by signal {status}", not stopped)
        if code == "dumped":
            return Reading(f"{m['unit']}: main process dumped core (signal {status})")
        return Reading(f"{m['unit']}: main process exited with status {status}")
    m = _KERNEL_OOM.search(text)
    if m:
        return Reading(f"Kernel OOM killer killed process {m['pid']} ({clip(m['comm'], 64)}): host RAM, not GPU",
                       cls=FindingClass.HOST_OOM)
    unit_m = _UNIT_PREFIX.match(text)
    unit = unit_m["unit"] if unit_m else "unit"
    if "Start request repeated too quickly" in text:
        return Reading(f"{unit}: restarted too often, systemd gave up (start-limit-hit)")
    if "Failed at step" in text or "Failed to execute" in text:
        return Reading(f"{unit}: could not run the command: {clip(text[unit_m.end() if unit_m else 0 :], 120)}")
    if "killed by the OOM killer" in text:
        return Reading(f"{unit}: a process was killed by the kernel's OOM killer (host RAM, not GPU)",
                       cls=FindingClass.HOST_OOM)
    m = _FAILED_RESULT.search(around(text, "Failed with result '"))
    if m:
        result = m["result"]
        if result == "success":
            return None
        why = {"oom-kill": " (kernel OOM killer, host RAM)", "start-limit-hit": " (restarted too often)"}
        cls = FindingClass.HOST_OOM if result == "oom-kill" else None
        return Reading(f"{m['unit'] or unit}: failed with result '{result}'{why.get(result, '')}", cls=cls)
    return None


_DIED_UNEXPECTEDLY = re.compile(
    r"(?P<who>engine core|Worker proc \S+) (?:exited|died) unexpectedly(?: \(exit code: (?P<code>[^)]*)\))?"
)
_SCHEDULER_TERMINATED = re.compile(r"Scheduler or DataParallelController (?P<pid>\d+) terminated with (?P<code>-?\d+)")


def engine_died(text: str, rank: str | None) -> Reading | None:
    """An engine process gone without an error of its own: vLLM's `MPClient: engine core exited
    unexpectedly` (its engine core was killed or crashed), `Worker proc X died unexpectedly`, SGLang's
    `Scheduler or DataParallelController PID terminated with CODE` on a non-head node."""
    m = _DIED_UNEXPECTEDLY.search(text)
    if m:
        code = m["code"]
        tail = f" (exit code {code})" if code and code != "None" else ""
        # vLLM logs it at WARNING, yet the engine is gone: certain whatever the level.
        return Reading(f"vLLM's {m['who']} exited unexpectedly{tail}: killed or crashed without an error of its own",
                       certain=True)
    m = _SCHEDULER_TERMINATED.search(text)
    if m:
        return Reading(f"SGLang's scheduler (pid {m['pid']}) terminated with {m['code']}", certain=True)
    return None
