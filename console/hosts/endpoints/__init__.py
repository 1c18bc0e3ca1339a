"""console.hosts.endpoints"""
