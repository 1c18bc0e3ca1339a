"""Panes of the host screen and the fleet table; each owns the worker that feeds it."""
