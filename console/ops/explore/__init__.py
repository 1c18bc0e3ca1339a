"""console.ops.explore.sweep"""
