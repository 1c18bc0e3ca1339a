"""The simulated systemd: a supervisor per unit, its journal file and its state file."""
