"""serve-console: a keyboard-driven console for LLM inference servers run as systemd units."""

__version__ = "0.1.0"
