"""console.sim.vllm: the simulated vLLM server."""
