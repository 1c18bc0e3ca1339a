"""console.sim"""
