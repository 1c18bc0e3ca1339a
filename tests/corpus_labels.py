"""The labelled log corpus (tests/corpus): its labels, and whether a finding is right for a label."""

from __future__ import annotations

import json
from pathlib import Path

from console.domain.values import Finding, FindingClass

CORPUS = Path(__file__).resolve().parent / "corpus"


LABELS = CORPUS / "labels.json"


_OOM_KEYS = ("gpu", "tried_bytes", "free_bytes", "total_bytes")


def _labels() -> list[dict]:
    return json.loads(LABELS.read_text(encoding="utf-8"))


def _right(label: dict, found: Finding | None) -> bool:
    cls = label["class"]
    if cls == "healthy":
        return found is None
    if found is None or not found.fatal:
        return False
    if cls in KNOWN:
        if found.cls.value != cls:
            return False
        if label.get("oom"):
            figures = found.oom
            return figures is not None and all(getattr(figures, k) == label["oom"][k] for k in _OOM_KEYS)
        return True
    return found.cls.value == cls or found.cls is FindingClass.ENGINE_ERROR


#: The classes triage knew before the corpus was collected.
KNOWN = frozenset({
    "cuda_oom", "kv_cache_too_small", "memory_in_use", "engine_init", "cuda_graph", "nccl", "port_in_use",
    "illegal_memory_access", "weight_load_error",
})
