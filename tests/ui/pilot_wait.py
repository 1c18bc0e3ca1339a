"""Waiting in Pilot tests: `settle` lives in tests/waiting.py (the one wait helper); this name stays for imports."""

from __future__ import annotations

from waiting import settle

__all__ = ["settle"]
