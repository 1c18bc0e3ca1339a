"""The one sanitiser for host text, and the redaction of secrets beside it (issue 10, items 3 and 14)."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from console.domain.redact import redact
from console.domain.safe_text import printable, shown
from console.domain.triage.signatures import clip

HOSTILE = (
    "\x1b]52;c;ZWNobyBoaQ==\x07"  # OSC 52: write the clipboard
    "\x1b]0;owned\x07"  # OSC 0: the window title
    "\x1b[2J"  # clear the screen
    "\u009b2J\u009d0;t\u009c"  # C1 CSI, OSC, ST
    "\u202eevil\u202c\u2066x\u2069\u200f\u061c"  # bidi
    "a\nb\rc\u2028d\u2029e\u0085f\x7f\x00"
)
LIVE = {chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))} - {"\t"}
LIVE |= set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029")


def test_every_control_bidi_and_line_break_becomes_visible_text():
    out = printable(HOSTILE)
    assert not LIVE & set(out)
    assert "\\x1b]52;c;" in out and "\\x9b2J" in out and "\\u202eevil" in out
    assert "a\\nb\\rc\\u2028d\\u2029e\\x85f\\x7f\\x00" in out


def test_tab_and_ordinary_unicode_pass_unchanged():
    text = "GPU 0\tNVIDIA H100 80GB HBM3 — 81559 MiB ✓ 日本語"
    assert printable(text) == text


@given(st.text())
def test_printable_leaves_nothing_live_and_is_stable(text):
    out = printable(text)
    assert not LIVE & set(out)
    assert printable(out) == out
    # Only the escaped characters change: removing the escapes' effect leaves the other characters.
    assert len(out) >= len(text)


@given(st.text())
def test_clip_output_has_no_controls(text):
    out = clip(text)
    assert not LIVE & set(out)
    assert all(unicodedata.category(ch) != "Cc" for ch in out)


def test_clip_shows_c1_and_bidi_as_escapes():
    assert clip("fatal \u009b2J \u202eevil") == "fatal \\x9b2J \\u202eevil"


def test_redaction_of_keys_tokens_and_authorization():
    assert redact("server_args=ServerArgs(model_path='m', api_key='sk-123', port=30000)") == (
        "server_args=ServerArgs(model_path='m', api_key='***', port=30000)"
    )
    assert redact("python -m sglang.launch_server --api-key sk-abc --port 1") == (
        "python -m sglang.launch_server --api-key *** --port 1"
    )
    assert redact("--api-key=xyz") == "--api-key=***"
    assert redact("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz") == "HF_TOKEN=***"
    assert redact("using hf_abcdefghijklmnopqrstuvwx12 to download") == "using *** to download"
    assert redact("Authorization: Bearer abc.def") == "Authorization: ***"
    assert redact("non-default args: {'api_key': 'secret', 'model': 'x'}") == (
        "non-default args: {'api_key': '***', 'model': 'x'}"
    )


def test_redaction_leaves_ordinary_lines_alone():
    for line in ("KV cache is needed: 3.2 GiB", "key=value tokens=128", "Token usage: 0.91", "hf_transfer on"):
        assert redact(line) == line


def test_shown_redacts_then_escapes():
    assert shown("api_key=k\x1b[2J") == "api_key=***"
    assert shown("x\x1b[2J") == "x\\x1b[2J"
