"""Who listens on a real host's port, read from `ss -ltnpH 'sport = :PORT'`: named when ss shows the owner,
said so when it does not, nothing when nothing listens."""

from __future__ import annotations

from console.hosts.listeners import ss_listener


def test_ss_names_the_owner_when_it_can():
    line = 'LISTEN 0 2048 127.0.0.1:30000 0.0.0.0:* users:(("python3",pid=4242,fd=7))\n'
    assert ss_listener(line) == "pid 4242 (python3)"
    assert ss_listener("LISTEN 0 2048 127.0.0.1:30000 0.0.0.0:*\n") == "a process ss does not name to this user"
    assert ss_listener("") is None and ss_listener("\n \n") is None
