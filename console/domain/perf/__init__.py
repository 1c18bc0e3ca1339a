"""The performance model: TTFT, TPOT and tok/s of a model in a layout, before anything restarts.

Beside fit (memory), this capability predicts speed from physics (bytes over bandwidth, FLOPs over
peak, collectives over links) weighed by a few coefficients a host's own measurements calibrate.
Other rooms import these names from here, never from its modules.
"""

from console.domain.perf.calibration import (
    METRICS,
    ZERO_SHOT_BAND,
    Calibration,
    Observation,
    calibrate,
    layout_kind,
    metric_value,
)
from console.domain.perf.hardware import (
    HARDWARE_FILE,
    INTERCONNECTS,
    GpuKind,
    LinkKind,
    default_interconnect,
    gpu_kind,
    link_kind,
)
from console.domain.perf.shape import PRECISION_BYTES, PerfModel, perf_model
from console.domain.perf.speed import (
    HostShape,
    LayoutTerms,
    SpeedPrediction,
    Workload,
    layout_terms,
    predict,
)
from console.domain.perf.step import Coefficients

__all__ = [
    "calibrate",
    "Calibration",
    "metric_value",
    "METRICS",
    "Observation",
    "ZERO_SHOT_BAND",
    "Coefficients",
    "default_interconnect",
    "gpu_kind",
    "GpuKind",
    "HARDWARE_FILE",
    "HostShape",
    "INTERCONNECTS",
    "layout_terms",
    "layout_kind",
    "LayoutTerms",
    "link_kind",
    "LinkKind",
    "perf_model",
    "PerfModel",
    "PRECISION_BYTES",
    "predict",
    "SpeedPrediction",
    "Workload",
]
