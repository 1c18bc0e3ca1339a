"""The simulated systemd: a supervisor per unit (`python -m console.sim.systemd.supervisor`), its journal file and its state file.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.sim.systemd.journal import PRIORITY_WARNING, append_entry, follow_journal, parse_cursor
from console.sim.systemd.unit_file import RestartPolicy, read_loaded, restart_settings, write_loaded
from console.sim.systemd.unit_state import read_state, supervisor_alive, unit_state_from, write_state

__all__ = [
    "append_entry",
    "follow_journal",
    "parse_cursor",
    "PRIORITY_WARNING",
    "read_loaded",
    "read_state",
    "restart_settings",
    "RestartPolicy",
    "supervisor_alive",
    "unit_state_from",
    "write_loaded",
    "write_state",
]
