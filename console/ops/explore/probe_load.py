"""The probe's load: prompts (seeded random, or a ShareGPT file) and how they are sent.

- Closed loop (`concurrency`): a semaphore over the prompt list, one run per level.
- Open loop (`request_rate`): exponential gaps between sends (Poisson arrivals), seeded, with
  `max_concurrency` as a semaphore over them; `inf` sends everything at once.
- Warm-up: requests sent before the first level (output capped at 32 tokens, as SGLang does), their
  results dropped; the probe stops if every one of them failed.
- `max_duration_s` bounds a level: no prompt is sent after it, requests still running are cut off and
  counted neither completed nor failed, and the level says `truncated`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from console.errors import ConsoleError, UsageError
from console.ops.explore.probe_client import COMPLETIONS, ProbeClient, Prompt
from console.ops.explore.probe_metrics import ProbeSummary, RequestResult, summarize

WARMUP_OUTPUT_CAP = 32
# Common short English words: about one token each in the usual BPE vocabularies.
_VOCAB = (
    "the of and to in is was for on are with as his they be at one have this from or had by hot word but "
    "what some we can out other were all there when up use your how said an each she which do their time "
    "if will way about many then them write would like so these her long make thing see him two has look "
    "more day could go come did number sound no most people my over know water than call first who may"
).split()


@dataclass(frozen=True, slots=True)
class ProbeOptions:
    """What one probe sends, and how."""

    concurrency: tuple[int, ...] = (1,)
    request_rate: float | None = None
    """Requests per second (Poisson); None for closed-loop concurrency levels; math.inf for all at once."""
    max_concurrency: int | None = None
    num_prompts: int | None = None
    """Requests per level; None for 4 times the level's concurrency, at least 8."""
    input_len: int = 256
    output_len: int = 128
    warmup: int = 1
    seed: int = 0
    dataset: Path | None = None
    max_duration_s: float | None = None
    endpoint: str = COMPLETIONS
    request_timeout_s: float | None = 600.0

    def levels(self) -> list[tuple[int | None, float | None]]:
        """(concurrency, request rate) of each run: one per concurrency, or one at the request rate."""
        if self.request_rate is not None:
            return [(self.max_concurrency, self.request_rate)]
        return [(c, None) for c in self.concurrency]

    def prompt_count(self, concurrency: int | None) -> int:
        """How many requests a level sends."""
        if self.num_prompts is not None:
            return self.num_prompts
        return max(8, 4 * (concurrency or 2))

    def to_json(self) -> dict:
        return {
            "concurrency": list(self.concurrency), "request_rate": self.request_rate,
            "max_concurrency": self.max_concurrency, "num_prompts": self.num_prompts,
            "input_len": self.input_len, "output_len": self.output_len, "warmup": self.warmup,
            "seed": self.seed, "dataset": str(self.dataset) if self.dataset else None,
            "max_duration_s": self.max_duration_s, "endpoint": self.endpoint,
        }  # fmt: skip

    @classmethod
    def from_json(cls, doc: dict) -> ProbeOptions:
        """The options `to_json` wrote (an explore's stored parameters, for --resume)."""
        rate = doc.get("request_rate")
        return cls(
            concurrency=tuple(doc.get("concurrency") or (1,)), request_rate=None if rate is None else float(rate),
            max_concurrency=doc.get("max_concurrency"), num_prompts=doc.get("num_prompts"),
            input_len=doc.get("input_len", 256), output_len=doc.get("output_len", 128),
            warmup=doc.get("warmup", 1), seed=doc.get("seed", 0),
            dataset=Path(doc["dataset"]) if doc.get("dataset") else None,
            max_duration_s=doc.get("max_duration_s"), endpoint=doc.get("endpoint", COMPLETIONS),
        )  # fmt: skip


def parse_levels(text: str) -> tuple[int, ...]:
    """`1,8,32` -> (1, 8, 32).

    Raises:
        UsageError: not a comma-separated list of positive integers.
    """
    try:
        levels = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        levels = ()
    if not levels or min(levels) < 1:
        raise UsageError(f"--concurrency {text!r}: give positive integers separated by commas")
    return levels


def random_prompts(count: int, input_len: int, output_len: int, seed: int) -> list[Prompt]:
    """`count` prompts of about `input_len` tokens each, the same for the same seed."""
    rng = random.Random(seed)
    return [
        Prompt(" ".join(rng.choices(_VOCAB, k=max(input_len, 1))), max(input_len, 1), output_len)
        for _ in range(count)
    ]


def sharegpt_prompts(path: Path, count: int, output_len: int, seed: int) -> list[Prompt]:
    """The first human turn of `count` conversations of a ShareGPT JSON file, shuffled by the story.

    Raises:
        UsageError: the file cannot be read, is not ShareGPT JSON, or holds no usable conversation
            (the message names the file, and the line of a JSON error).
    """
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the dataset: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: the dataset is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    if not isinstance(doc, list):
        raise UsageError(f"{path}: a ShareGPT dataset is a JSON list of conversations")
    texts = []
    for item in doc:
        turns = item.get("conversations") if isinstance(item, dict) else None
        if isinstance(turns, list) and turns and isinstance(turns[0], dict):
            value = turns[0].get("value")
            if isinstance(value, str) and value.strip():
                texts.append(value)
    if not texts:
        raise UsageError(f"{path}: no conversation with a first turn (`conversations[0].value`)")
    random.Random(seed).shuffle(texts)
    chosen = (texts * math.ceil(count / len(texts)))[:count]
    return [Prompt(t, max(1, len(t) // 4), output_len) for t in chosen]


def build_prompts(options: ProbeOptions, n: int) -> list[Prompt]:
    """`n` prompts as the options say (the same `n` prompts for the same seed)."""
    if options.dataset is not None:
        return sharegpt_prompts(options.dataset, n, options.output_len, options.seed)
    return random_prompts(n, options.input_len, options.output_len, options.seed)


#: Called after each request of a level: (requests finished, requests in the level, output tokens so far,
#: seconds since the level began).
ProgressSink = Callable[[int, int, int, float], None]


async def run_level(
    client: ProbeClient,
    prompts: Sequence[Prompt],
    *,
    concurrency: int | None,
    request_rate: float | None = None,
    seed: int = 0,
    max_duration_s: float | None = None,
    on_progress: ProgressSink | None = None,
) -> ProbeSummary:
    """Send every prompt under the level's load and summarise it."""
    limit = asyncio.Semaphore(concurrency) if concurrency else None
    results: list[RequestResult] = []
    tokens = 0

    async def one(prompt: Prompt) -> None:
        nonlocal tokens
        async with limit if limit is not None else contextlib.nullcontext():
            result = await client.request(prompt)
        results.append(result)
        tokens += result.output_tokens
        if on_progress is not None:
            on_progress(len(results), len(prompts), tokens, time.perf_counter() - started)

    started = time.perf_counter()
    deadline = None if max_duration_s is None else started + max_duration_s
    rng = random.Random(seed)
    tasks: list[asyncio.Task] = []
    truncated = False
    try:
        for prompt in prompts:
            if request_rate is not None and not math.isinf(request_rate) and tasks:
                await asyncio.sleep(rng.expovariate(request_rate))
            if deadline is not None and time.perf_counter() >= deadline:
                truncated = True
                break
            tasks.append(asyncio.create_task(one(prompt)))
        if tasks:
            timeout = None if deadline is None else max(deadline - time.perf_counter(), 0.0)
            _done, pending = await asyncio.wait(tasks, timeout=timeout)
            truncated = truncated or bool(pending)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    duration = time.perf_counter() - started
    return summarize(results, duration, concurrency=concurrency, request_rate=request_rate,
                     num_prompts=len(prompts), truncated=truncated)


class WarmupFailed(ConsoleError):
    """Every warm-up request failed: the server is not serving, so no level is run."""


async def warm_up(client: ProbeClient, options: ProbeOptions) -> None:
    """Send `options.warmup` short requests and drop their results.

    Raises:
        WarmupFailed: every one failed (the message gives the first error).
    """
    if options.warmup <= 0:
        return
    prompts = [Prompt(p.text, p.prompt_tokens, min(p.output_len, WARMUP_OUTPUT_CAP))
               for p in build_prompts(options, options.warmup)]
    width = max(options.concurrency) if options.request_rate is None else (options.max_concurrency or 1)
    summary = await run_level(client, prompts, concurrency=max(1, min(width, len(prompts))))
    if summary.completed == 0:
        first = summary.errors[0] if summary.errors else "no answer"
        raise WarmupFailed(f"every warm-up request failed ({first})")
