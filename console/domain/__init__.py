"""console.domain"""
