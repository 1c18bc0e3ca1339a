"""TTFT, TPOT and tok/s of a model in a layout on a host, for a workload: the performance model's face.

Per replica of C / replicas requests:
- decode: a step of every pipeline stage at the stage's micro-batch; m = min(requests, P) micro-batches
  are in flight, so TPOT = max(one pass through the P stages and P - 1 handoffs, m x the slowest stage):
  with one request the other stages idle (the bubble);
- prefill: the prompts of the replica in one pass (TTFT = that pass plus one decode step);
- aggregate output tok/s = C x output_len / (TTFT + output_len x TPOT).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console.domain.layout import Layout
from console.domain.perf import comm
from console.domain.perf.hardware import GpuKind, link_kind
from console.domain.perf.shape import PerfModel, StageWeights, stage_weights
from console.domain.perf.step import ACT_BYTES, Batch, Coefficients, Fabric, StepTerms, stage_terms
from console.domain.values import Engine


@dataclass(frozen=True, slots=True)
class HostShape:
    """The GPUs a layout runs on: their kind, how many per node, nodes, and the link inside a node."""

    gpu: GpuKind
    gpus_per_node: int
    nodes: int = 1
    interconnect: str = "pcie"


@dataclass(frozen=True, slots=True)
class Workload:
    """A benchmark's shape: prompt and output lengths in tokens, requests in flight."""

    input_len: int
    output_len: int
    concurrency: int


@dataclass(frozen=True, slots=True)
class LayoutTerms:
    """A layout's decode and prefill terms for one workload: coefficients turn them into times."""

    decode: tuple[StepTerms, ...]
    prefill: tuple[StepTerms, ...]
    handoff: comm.CollectiveCost
    handoff_prefill: comm.CollectiveCost
    pp: int
    micro_batches: int
    concurrency: int
    output_len: int

    def tpot_s(self, k: Coefficients) -> float:
        """One token of every request: a pass through all stages, or m micro-batches on the slowest."""
        stages = [t.seconds(k) for t in self.decode]
        hand = self.handoff.latency_s * k.comm_scale + self.handoff.transfer_s
        one_pass = sum(stages) + (self.pp - 1) * hand
        return max(one_pass, self.micro_batches * max(stages)) + k.step_us * 1e-6

    def ttft_s(self, k: Coefficients) -> float:
        hand = self.handoff_prefill.latency_s * k.comm_scale + self.handoff_prefill.transfer_s
        prefill = sum(t.seconds(k) for t in self.prefill) + (self.pp - 1) * hand
        return prefill + self.tpot_s(k)


@dataclass(frozen=True, slots=True)
class SpeedPrediction:
    """One (layout, concurrency) prediction; `low`/`high` bound `output_tok_s`."""

    layout: str
    concurrency: int
    ttft_ms: float
    tpot_ms: float
    output_tok_s: float
    per_request_tok_s: float
    low_tok_s: float
    high_tok_s: float
    calibrated: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "layout": self.layout,
            "concurrency": self.concurrency,
            "ttft_ms": round(self.ttft_ms, 2),
            "tpot_ms": round(self.tpot_ms, 3),
            "output_tok_s": round(self.output_tok_s, 1),
            "per_request_tok_s": round(self.per_request_tok_s, 2),
            "range": {"low": round(self.low_tok_s, 1), "high": round(self.high_tok_s, 1)},
            "calibrated": self.calibrated,
        }


def replicas(layout: Layout, engine: Engine) -> int:
    """Independent copies of the model the requests are spread over (SGLang --dp-size without DPA)."""
    if engine is Engine.SGLANG:
        return 1 if layout.dp_attention else layout.dp
    return 1


def layout_terms(
    model: PerfModel, layout: Layout, engine: Engine | str, host: HostShape, work: Workload
) -> LayoutTerms:
    """The physics of a layout for a workload, once; `predict` weighs it with coefficients."""
    engine = Engine.VLLM if Engine(engine) is Engine.OPENAI else Engine(engine)
    fabric = Fabric(
        intra=link_kind(host.interconnect), inter=link_kind("network"), gpus_per_node=host.gpus_per_node
    )
    per_replica = max(1.0, work.concurrency / replicas(layout, engine))
    groups = layout.dp if _attn_dp(layout, engine) else 1
    pp = layout.pp
    micro = max(1.0, per_replica / min(per_replica, pp))
    context = work.input_len + work.output_len / 2
    stages: list[StageWeights] = [stage_weights(model, layout, engine, s) for s in range(pp)]
    decode_batch = Batch(attn_tokens=micro / groups, moe_tokens=micro, context=context)
    prompt_tokens = per_replica * work.input_len
    prefill_batch = Batch(
        attn_tokens=prompt_tokens / groups, moe_tokens=prompt_tokens, context=work.input_len / 2, prefill=True
    )
    decode = tuple(stage_terms(model, w, layout, engine, host.gpu, fabric, decode_batch) for w in stages)
    prefill = tuple(stage_terms(model, w, layout, engine, host.gpu, fabric, prefill_batch) for w in stages)
    link = fabric.over(layout.tp * pp if host.nodes > 1 else 1)
    hidden = model.spec.hidden_size * ACT_BYTES
    return LayoutTerms(
        decode=decode,
        prefill=prefill,
        handoff=comm.send_recv(link, micro * hidden) if pp > 1 else comm.CollectiveCost(0, 0),
        handoff_prefill=comm.send_recv(link, prompt_tokens * hidden) if pp > 1 else comm.CollectiveCost(0, 0),
        pp=pp,
        micro_batches=int(min(per_replica, pp)),
        concurrency=work.concurrency,
        output_len=work.output_len,
    )


def _attn_dp(layout: Layout, engine: Engine) -> bool:
    """True when attention runs data-parallel inside the MoE group (SGLang DPA, vLLM --data-parallel-size)."""
    return layout.dp_attention if engine is Engine.SGLANG else layout.dp > 1


def predict(
    terms: LayoutTerms,
    name: str,
    k: Coefficients,
    *,
    band: float,
    calibrated: bool,
) -> SpeedPrediction:
    """Times and rates of a layout's terms under coefficients `k`; `band` is the range's +/- share."""
    tpot = terms.tpot_s(k)
    ttft = terms.ttft_s(k)
    out_len = max(1, terms.output_len)
    aggregate = terms.concurrency * out_len / (ttft + out_len * tpot)
    return SpeedPrediction(
        layout=name,
        concurrency=terms.concurrency,
        ttft_ms=ttft * 1e3,
        tpot_ms=tpot * 1e3,
        output_tok_s=aggregate,
        per_request_tok_s=1.0 / tpot,
        low_tok_s=aggregate / (1 + band),
        high_tok_s=aggregate * (1 + band),
        calibrated=calibrated,
    )
