"""console.ops.switch.orchestrate"""
