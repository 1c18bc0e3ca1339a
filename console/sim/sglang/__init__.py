"""console.sim.sglang"""
