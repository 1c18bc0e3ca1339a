"""console.ops"""
