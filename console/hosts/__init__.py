"""console.hosts"""
