"""The fit predictor: model specs, sharding, weights and engine memory per GPU of a layout.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.domain.fit.engine_memory import (
    kv_bytes_per_token,
    sglang_default_mem_fraction,
    torch_capacity_bytes,
    vllm_activation_bytes,
)
from console.domain.fit.gpu_health import BAD, IDLE, OK, WARN, GpuVerdict, expected_used_mib, judge_gpus
from console.domain.fit.model_spec import ConfigTooLarge, ModelSpec, load_model_spec, read_model_config_bytes
from console.domain.fit.predict import FitResult, predict_fit
from console.domain.fit.sharding import placement
from console.domain.fit.weights import rank_load_plan, rank_weight_bytes

__all__ = [
    "BAD",
    "ConfigTooLarge",
    "expected_used_mib",
    "FitResult",
    "GpuVerdict",
    "IDLE",
    "judge_gpus",
    "kv_bytes_per_token",
    "load_model_spec",
    "ModelSpec",
    "OK",
    "placement",
    "predict_fit",
    "rank_load_plan",
    "rank_weight_bytes",
    "read_model_config_bytes",
    "sglang_default_mem_fraction",
    "torch_capacity_bytes",
    "vllm_activation_bytes",
    "WARN",
]
