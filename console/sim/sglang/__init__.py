"""console.sim.sglang: the simulated SGLang server."""
