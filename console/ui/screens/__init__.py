"""Screens: fleet overview, a screen per host, the layout picker, the switch confirmation, help."""
