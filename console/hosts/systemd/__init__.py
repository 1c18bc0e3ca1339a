"""systemd over a Transport: unit state and actions, the files the console writes, the journal.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.hosts.systemd.manager import SystemdManager

__all__ = [
    "SystemdManager",
]
