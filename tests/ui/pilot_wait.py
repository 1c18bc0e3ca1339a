"""Waiting in Pilot tests: `settle` lives in tests/waiting.py (the one wait helper); this name stays for imports."""

from __future__ import annotations

from waiting import settle

__all__ = ["settle"]


async def wait_for(pilot, predicate, timeout_s: float = 30.0) -> bool:
    return await settle(pilot, predicate, timeout_s=timeout_s)
