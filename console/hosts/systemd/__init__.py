"""console.hosts.systemd.manager"""
