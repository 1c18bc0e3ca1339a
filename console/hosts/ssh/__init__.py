"""One persistent SSH connection per host: its channels, port forwards and strict host keys.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.hosts.ssh.forward import SshPortForward
from console.hosts.ssh.transport import SshTransport

__all__ = [
    "SshPortForward",
    "SshTransport",
]
