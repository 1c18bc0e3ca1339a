"""The outbox as the deliverer sees it: the state file's queue, and memory while the state file cannot be
written (its disk full, its directory read-only).

A full disk must not keep an alert from leaving: a transition the state file refuses is queued here in
memory, per destination and bounded as the file's queue is, and delivered after what the file holds. A
delivery that landed but whose row the file cannot yet delete is remembered, so it is not sent again
while the file stays unwritable. Every fault of the file is said once, in one line, and once more when
it is writable again.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Sequence

from console.domain.alerts import RESOLVED, Alert
from console.ops.state_db import AuditError
from console.ops.watch.store import AlertStore, Delivery


class Outbox:
    """Deliveries owed, from the state file first, then from memory.

    Args:
        store: The state file's outbox.
        say: Where one-line reports go.
    """

    def __init__(self, store: AlertStore, say: Callable[[str], None]) -> None:
        self.store = store
        self.say = say
        self.memory: dict[str, deque[Delivery]] = {}
        self._ids = itertools.count(-1, -1)  # memory's ids are negative: never a row's
        self._landed: dict[int, str] = {}
        """Rows delivered whose deletion the state file refused (id -> destination): not sent again."""
        self.fault: str | None = None
        self.dropped = 0
        self._reported: set[int] = set()

    def report_damage(self) -> None:
        """Say each damaged row of the state file once (it is skipped; alerting goes on)."""
        for row_id, line in zip(sorted(self.store.damaged), self.store.damage_lines(), strict=True):
            if row_id not in self._reported:
                self._reported.add(row_id)
                self.say(line)

    def store_fault(self, exc: AuditError) -> None:
        """The state file refused a write (or a read): say so once."""
        if self.fault is None:
            self.say(f"{exc}; alerts are delivered from memory and not recorded until it is writable")
        self.fault = str(exc)

    def store_ok(self) -> None:
        if self.fault is not None:
            self.say(f"state file {self.store.path} is writable again")
        self.fault = None

    def hold(self, sinks: Sequence[str], status: str, alert: Alert) -> list[str]:
        """Owe `status` of `alert` to each destination, in memory; returns those that had to drop one."""
        dropped = []
        for sink in sinks:
            queue = self.memory.setdefault(sink, deque())
            if len(queue) >= self.store.queue_max:
                old = next((d for d in queue if d.status == RESOLVED), queue[0])
                queue.remove(old)
                self.dropped += 1
                dropped.append(sink)
            queue.append(Delivery(next(self._ids), sink, status, alert, 0))
        return dropped

    def pending(self, sink: str, limit: int, skip: set[int] | frozenset[int] = frozenset()) -> list[Delivery]:
        """The oldest deliveries owed to `sink`: the file's, then memory's, less `skip`."""
        self._retry_landed()
        rows: list[Delivery] = []
        try:
            rows = self.store.pending(sink, limit + len(skip) + len(self._landed))
        except AuditError as exc:
            self.store_fault(exc)
        if len(self.store.damaged) > len(self._reported):
            self.report_damage()
        out = [d for d in rows if d.id not in skip and d.id not in self._landed]
        out += [d for d in self.memory.get(sink, ()) if d.id not in skip]
        return out[:limit]

    def queued(self, sink: str) -> int:
        try:
            stored = self.store.queued(sink)
        except AuditError as exc:
            self.store_fault(exc)
            stored = 0
        return stored + len(self.memory.get(sink, ())) - sum(1 for s in self._landed.values() if s == sink)

    def delivered(self, batch: Sequence[Delivery]) -> None:
        self._forget_memory(batch)
        rows = [d for d in batch if d.id > 0]
        if rows:
            try:
                self.store.delivered([d.id for d in rows])
            except AuditError as exc:
                self.store_fault(exc)
                self._landed.update((d.id, d.sink) for d in rows)

    def attempted(self, batch: Sequence[Delivery], error: str) -> None:
        rows = [d.id for d in batch if d.id > 0]
        if rows:
            try:
                self.store.attempted(rows, error)
            except AuditError as exc:
                self.store_fault(exc)

    def rejected(self, delivery: Delivery) -> None:
        """Dropped for good (counted in the file where it can be)."""
        self._forget_memory([delivery])
        if delivery.id > 0:
            try:
                self.store.rejected(delivery)
            except AuditError as exc:
                self.store_fault(exc)
                self._landed[delivery.id] = delivery.sink
        else:
            self.dropped += 1

    def _forget_memory(self, batch: Sequence[Delivery]) -> None:
        for d in batch:
            if d.id < 0 and d in self.memory.get(d.sink, ()):
                self.memory[d.sink].remove(d)

    def _retry_landed(self) -> None:
        if not self._landed:
            return
        try:
            self.store.delivered(sorted(self._landed))
        except AuditError:
            return
        self._landed.clear()
