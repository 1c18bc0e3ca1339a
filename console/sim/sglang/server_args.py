"""SGLang's first line: `server_args=ServerArgs(...)`, the dataclass repr of every setting."""

from __future__ import annotations

from console.sim.engine_args import EngineArgs


def server_args_line(args: EngineArgs, mem_fraction: float) -> str:
    """The launcher's `server_args=ServerArgs(...)` line, fields in SGLang's order."""
    extra = dict(args.passthrough)
    layout = args.layout
    fields: list[tuple[str, object]] = [
        ("model_path", args.model_path),
        ("tokenizer_path", extra.get("tokenizer_path") or args.model_path),
        ("tokenizer_mode", "auto"),
        ("skip_tokenizer_init", False),
        ("load_format", extra.get("load_format") or "auto"),
        ("trust_remote_code", bool(extra.get("trust_remote_code"))),
        ("dtype", extra.get("dtype") or "auto"),
        ("kv_cache_dtype", extra.get("kv_cache_dtype") or "auto"),
        ("quantization", extra.get("quantization")),
        ("context_length", args.context_length),
        ("device", "cuda"),
        ("served_model_name", args.served_model_name),
        ("chat_template", extra.get("chat_template")),
        ("is_embedding", False),
        ("host", args.host),
        ("port", args.port),
        ("mem_fraction_static", mem_fraction),
        ("max_running_requests", args.max_running_requests),
        ("max_total_tokens", None),
        ("chunked_prefill_size", args.chunked_prefill_size),
        ("max_prefill_tokens", 16384),
        ("schedule_policy", "fcfs"),
        ("schedule_conservativeness", 1.0),
        ("cpu_offload_gb", 0),
        ("page_size", 1),
        ("tp_size", layout.tp),
        ("pp_size", layout.pp),
        ("stream_interval", 1),
        ("stream_output", False),
        ("random_seed", args.random_seed),
        ("watchdog_timeout", extra.get("watchdog_timeout", 300)),
        ("dist_timeout", args.dist_timeout_s),
        ("download_dir", None),
        ("base_gpu_id", args.base_gpu_id),
        ("gpu_id_step", args.gpu_id_step),
        ("log_level", extra.get("log_level") or "info"),
        ("log_level_http", None),
        ("log_requests", bool(extra.get("log_requests"))),
        ("log_requests_level", extra.get("log_requests_level", 2)),
        ("show_time_cost", False),
        ("enable_metrics", args.enable_metrics),
        ("decode_log_interval", 40),
        ("api_key", None),
        ("file_storage_path", "sglang_storage"),
        ("enable_cache_report", False),
        ("reasoning_parser", extra.get("reasoning_parser")),
        ("tool_call_parser", extra.get("tool_call_parser")),
        ("dp_size", layout.dp),
        ("load_balance_method", "round_robin"),
        ("dist_init_addr", args.dist_init_addr),
        ("nnodes", args.nnodes),
        ("node_rank", args.node_rank),
        ("attention_backend", extra.get("attention_backend")),
        ("sampling_backend", "flashinfer"),
        ("ep_size", layout.ep),
        ("moe_a2a_backend", extra.get("moe_a2a_backend") or "none"),
        ("enable_dp_attention", layout.dp_attention),
        ("disable_cuda_graph", bool(extra.get("disable_cuda_graph"))),
        ("cuda_graph_max_bs", args.cuda_graph_max_bs),
        ("enable_torch_compile", bool(extra.get("enable_torch_compile"))),
        ("skip_server_warmup", bool(extra.get("skip_server_warmup"))),
    ]
    body = ", ".join(f"{name}={value!r}" for name, value in fields)
    return f"server_args=ServerArgs({body})"
