"""console.commands"""
