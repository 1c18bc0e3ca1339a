"""The simulated host: process manager, unit state and journal files, and the Host it builds."""
