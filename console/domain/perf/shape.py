"""What a step of one rank reads and computes: weight bytes by kind, from fit's per-rank load plan.

fit already knows, per engine, which tensors each rank holds and how quantisation sizes them; the
performance model reads the same plan and splits it into what every decode step reads (attention,
dense MLP, shared experts, lm_head) and the routed experts, of which a step reads only those touched.
A `precision` override (`bf16`, `fp8`, `fp4`) re-sizes the linear layers when the checkpoint served is
a quantised copy of the config's (nvfp4: 4 bits plus an fp8 scale per 16 values = 4.5 bits).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from console.domain.fit import ModelSpec, placement, rank_load_plan
from console.domain.layout import Layout
from console.domain.values import Engine

#: Bytes per parameter of the linear weights under each precision override.
PRECISION_BYTES = {"bf16": 2.0, "fp8": 1.0 + 4 / (128 * 128), "fp4": 4.5 / 8}


@dataclass(frozen=True, slots=True)
class PerfModel:
    """A model as the performance model sees it: fit's spec plus routing and compute precision."""

    spec: ModelSpec
    experts_per_token: int
    precision: str | None = None

    @property
    def compute_dtype(self) -> str:
        """The GEMM dtype: fp8/fp4 checkpoints run fp8/fp4 GEMMs; int4 is weight-only (bf16 math)."""
        if self.precision in ("fp8", "fp4"):
            return self.precision
        return "fp8" if self.spec.quant.method == "fp8" else "bf16"


def perf_model(spec: ModelSpec, config: dict, precision: str | None = None) -> PerfModel:
    """A PerfModel from fit's spec and the raw config (for `num_experts_per_tok`)."""
    text = config.get("text_config") or config.get("language_config") or config
    top_k = int(text.get("num_experts_per_tok") or text.get("moe_topk") or (2 if spec.is_moe else 0))
    if precision is not None and precision not in PRECISION_BYTES:
        raise ValueError(f"precision must be one of {', '.join(PRECISION_BYTES)}, got {precision!r}")
    return PerfModel(spec=spec, experts_per_token=top_k if spec.is_moe else 0, precision=precision)


@dataclass(frozen=True, slots=True)
class StageWeights:
    """Weight bytes one rank of a pipeline stage holds, split by how a step reads them."""

    layers: int
    moe_layers: int
    always_bytes: float
    expert_bytes: float
    always_params: float
    expert_params_per_expert: float
    local_experts: int
    expert_tp: int
    attn_tp: int


def stage_weights(model: PerfModel, layout: Layout, engine: Engine, pp_rank: int) -> StageWeights:
    """What rank 0 of pipeline stage `pp_rank` holds (ranks of a stage hold alike, up to one expert)."""
    spec = model.spec
    rank = pp_rank * layout.tp
    where = placement(spec, layout, engine, rank)
    sized = rank_load_plan(spec, layout, engine, rank)
    plain = rank_load_plan(replace(spec, quant=type(spec.quant)()), layout, engine, rank)
    always, expert = _split(sized, model.precision, spec.dtype_bytes, sized=True)
    always_params, expert_params = _split(plain, None, spec.dtype_bytes, sized=False)
    if model.precision:
        always, expert = _split(plain, model.precision, spec.dtype_bytes, sized=True)
    stage_layers = where.end_layer - where.first_layer
    moe = sum(1 for i in spec.moe_layers if where.holds(i))
    per_expert = expert_params / max(1, moe * where.local_experts) * where.expert_tp if moe else 0.0
    return StageWeights(
        layers=stage_layers,
        moe_layers=moe,
        always_bytes=always,
        expert_bytes=expert,
        always_params=always_params,
        expert_params_per_expert=per_expert,
        local_experts=where.local_experts,
        expert_tp=where.expert_tp,
        attn_tp=where.attn_tp,
    )


def _split(plan: list, precision: str | None, dtype_bytes: int, *, sized: bool) -> tuple[float, float]:
    """(always-read, routed-expert) totals of a plan: bytes when `sized`, else parameters.

    A precision override re-sizes the layers' linear weights of an unquantised plan.
    """
    always = expert = 0.0
    for alloc in plan:
        name = alloc.name
        if "embed_tokens" in name or "vision" in name:
            continue  # a decode step gathers b rows of the embedding, not the table
        value = float(alloc.nbytes) if sized else alloc.nbytes / dtype_bytes
        if sized and precision and alloc.layer is not None and _is_linear(name):
            value = alloc.nbytes / dtype_bytes * PRECISION_BYTES[precision]
        if ".experts." in name or name.endswith(".experts"):
            expert += value
        else:
            always += value
    return always, expert


def _is_linear(name: str) -> bool:
    return "norm" not in name and not name.endswith("gate.weight") and "bias" not in name
