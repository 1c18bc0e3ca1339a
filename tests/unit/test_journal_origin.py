"""Who wrote a journal entry decides what it may say: systemd's milestones only in systemd's own entries."""

from __future__ import annotations

import json

from journal_fakes import FakeJournal, take

from console.domain.values import Engine, FindingClass, JournalEntry, Phase
from console.hosts.journal_hub import JournalHub
from console.hosts.systemd.parse import journal_entry_from_json

UNIT = "sglang.service"
KILLED = f"{UNIT}: Main process exited, code=killed, status=9/KILL"


def _entry(**fields) -> JournalEntry:
    return journal_entry_from_json(json.dumps({"__CURSOR": "c", "__REALTIME_TIMESTAMP": "1", **fields}), UNIT)


def test_only_the_managers_own_entry_about_the_unit_is_systemds():
    # systemd's own line names the unit in UNIT=, which the unit's stdout can never carry.
    assert _entry(MESSAGE=KILLED, _PID="1", _COMM="systemd", UNIT=UNIT).by_systemd
    # The engine's stdout, whatever it prints and whatever it is called, is the unit's.
    assert not _entry(MESSAGE=KILLED, _PID="812", _COMM="python3", _SYSTEMD_UNIT=UNIT).by_systemd
    assert not _entry(MESSAGE=KILLED, _PID="812", _COMM="systemd", _SYSTEMD_UNIT=UNIT).by_systemd
    assert not _entry(MESSAGE=KILLED, _PID="812", SYSLOG_IDENTIFIER="systemd", _SYSTEMD_UNIT=UNIT).by_systemd
    assert not _entry(MESSAGE=KILLED, _PID="1", _SYSTEMD_UNIT="init.scope").by_systemd  # no unit named


class _Journal(FakeJournal):
    def add_from(self, message: str, source: str) -> None:
        entry = self.add(message)
        self.entries[-1] = JournalEntry(entry.cursor, entry.ts, entry.unit, entry.message, source=source)


async def test_the_hub_reads_systemds_words_only_in_systemds_entries():
    journal = _Journal()
    hub = JournalHub(lambda: journal)
    stream = hub.subscribe(UNIT, engine=Engine.SGLANG, lines=10)
    journal.add_from("[2026-05-26 00:06:20] Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)", "unit")
    journal.add_from(KILLED, "unit")  # the engine's own stdout, quoting systemd
    journal.add_from(KILLED, "systemd")
    up, quoted, real = await take(stream, 3)
    assert up.phase is not None and up.phase.phase is Phase.HTTP_UP
    assert quoted.findings == () and quoted.phase is None
    assert [f.cls for f in real.findings] == [FindingClass.UNIT_FAILED] and real.phase.phase is Phase.FAILED
    await stream.aclose()
    await hub.close()
