"""A parallelism layout (TP/EP/PP/DP) and the engine rules around it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Layout:
    """A parallelism layout, engine-neutral.

    `ep` is the expert-parallel size as SGLang's `--ep-size` spells it; for vLLM's
    `--enable-expert-parallel` it is tp x dp. `extra_args` are engine flags passed through unchanged.
    """

    tp: int = 1
    ep: int = 1
    pp: int = 1
    dp: int = 1
    dp_attention: bool = False
    extra_args: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """Canonical short name: `TP8`, `TP8 EP8`, `PP8`, `TP4 EP2`, `TP8 DP8 DPA`."""
        parts = []
        if self.tp > 1 or (self.pp == 1 and self.dp == 1):
            parts.append(f"TP{self.tp}")
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        if self.pp > 1:
            parts.append(f"PP{self.pp}")
        if self.dp > 1:
            parts.append(f"DP{self.dp}")
        if self.dp_attention:
            parts.append("DPA")
        return " ".join(parts)
