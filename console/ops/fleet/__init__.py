"""console.ops.fleet.rows"""
