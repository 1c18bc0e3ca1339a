"""console.hosts.ssh.transport"""
