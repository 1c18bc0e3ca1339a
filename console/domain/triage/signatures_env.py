"""Signatures of a start that cannot work in this set-up: the model, its access, the GPU, the driver.

These failures need no GPU memory to happen and no retry fixes them: an architecture the engine does
not know, a Hugging Face repo that refuses access, a build without kernels for this GPU, a
quantization the GPU cannot run, a driver older than the CUDA runtime, a max model length beyond the
model's own, or a kernel that does not compile.
"""

from __future__ import annotations

import re

from console.domain.triage.signatures import Reading, around, clip, gpu_arch

_ARCHITECTURES = re.compile(r"architectures? \[?(?P<arch>[^\]\n]{1,160}?)\]? (?:are|is) not supported")
_MAX_MODEL_LEN = re.compile(
    r"(?:max_model_len|context_length|max_position_embeddings) \((?P<want>\d+)\) is greater than the derived "
    r"(?:max_model_len|context_length|context length) \((?P<derived>[^)]{1,120})\)"
)
_CAPABILITY = re.compile(r"Minimum capability: (?P<need>\d+)\. Current capability: (?P<have>\d+)")
_QUANT_METHOD = re.compile(r"quantization method (?P<method>[\w-]{1,40})")
_SHARED_MEM = re.compile(r"Required: (?P<need>\d+), Hardware limit: (?P<limit>\d+)")
_REPO_ID = re.compile(r"(?:Repo id[^:]{0,200}: |repo(?:_id)?[ =:]+)'(?P<repo>[^'\n]{1,200})'")
_URL_REPO = re.compile(r"huggingface\.co/(?:api/models/)?(?P<repo>[\w.-]{1,96}/[\w.-]{1,96})")


def unsupported_architecture(text: str, rank: str | None) -> Reading | None:
    """The engine does not know (or cannot import) the model's architecture."""
    m = _ARCHITECTURES.search(around(text, "not supported", 200, 20))
    if m:
        return Reading(f"Model architecture not supported by this engine version: {clip(m['arch'], 100)}")
    if "failed to be inspected" in text or "Cannot inspect model architecture" in text:
        return Reading(f"Model architecture could not be inspected: {clip(text, 140)}")
    if "does not recognize this architecture" in text or "Unrecognized model" in text:
        return Reading(f"Model type not recognised: {clip(text, 140)}")
    return None


def hf_access(text: str, rank: str | None) -> Reading:
    """Hugging Face refused the model: a wrong repo id, a gated or private repo, no token."""
    repo = _REPO_ID.search(text) or _URL_REPO.search(text)
    what = f" ({clip(repo['repo'], 100)})" if repo else ""
    if "HFValidationError" in text or "Repo id must" in text:
        return Reading(f"Not a valid Hugging Face repo id{what}: a local --model path that does not exist?")
    if "gated" in text.lower() or "401" in text or "403" in text or "restricted" in text:
        return Reading(f"Hugging Face refused access{what}: gated or private repo, or no/invalid HF_TOKEN")
    if "RepositoryNotFound" in text or "Repository Not Found" in text or "not a valid model identifier" in text:
        return Reading(f"Hugging Face repo not found{what}: check --model")
    return Reading(f"Hugging Face access failed{what}: {clip(text, 120)}")


def no_kernel_image(text: str, rank: str | None) -> Reading:
    """The build has no kernels for this GPU's architecture."""
    arch = gpu_arch(text)
    where = f" ({arch})" if arch else ""
    return Reading(
        f"no kernel image: this build has no kernels for this GPU{where}",
        hint=f"this build has no kernels for this GPU{where}; use a build for it",
    )


def quantization_unsupported(text: str, rank: str | None) -> Reading | None:
    """A quantization method this GPU's compute capability cannot run."""
    cap = _CAPABILITY.search(text)
    method = _QUANT_METHOD.search(text)
    name = method["method"] if method else "this quantization"
    if cap:
        need, have = cap["need"], cap["have"]
        return Reading(
            f"Quantization {name} needs compute capability {int(need) / 10:.1f}, this GPU has {int(have) / 10:.1f}"
        )
    if "not supported" in text or "Unknown quantization" in text or "does not support" in text:
        return Reading(f"Quantization not supported: {clip(text, 140)}")
    return None


def cuda_driver_too_old(text: str, rank: str | None) -> Reading:
    """The NVIDIA driver is older than the CUDA runtime the engine was built with."""
    return Reading(f"NVIDIA driver too old for this CUDA runtime: {clip(text, 120)}")


def max_model_len(text: str, rank: str | None) -> Reading | None:
    """The requested max model length exceeds the model's own maximum."""
    m = _MAX_MODEL_LEN.search(around(text, "is greater than the derived", 120, 140))
    if m is None:
        return None
    return Reading(f"max model length {m['want']} exceeds the model's maximum ({clip(m['derived'], 100)})")


def compile_error(text: str, rank: str | None) -> Reading:
    """A Triton or inductor kernel that does not compile or does not fit the GPU."""
    m = _SHARED_MEM.search(text)
    if m and "shared memory" in text:
        return Reading(
            f"Kernel needs {m['need']} bytes of shared memory, the GPU allows {m['limit']}: {clip(text, 80)}"
        )
    return Reading(f"Kernel compilation failed: {clip(text, 140)}")
