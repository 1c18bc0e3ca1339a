"""console.ui"""
