"""console.sim.vllm.server"""
