"""Secrets in host text shown as `***`: API keys, Hugging Face tokens, Authorization values.

Engines print their own arguments at start (SGLang's `server_args=ServerArgs(... api_key='...')`, vLLM's
`non-default args: {'api_key': ...}`), and command lines carry `--api-key`. The console shows such
lines with the value replaced. Only what the console shows changes: the journal on the host, the audit
log and JSON output keep the text they had.
"""

from __future__ import annotations

import re

MASK = "***"

_KEY_HINTS = ("api_key", "api-key", "apikey", "hf_token", "hub_token", "hf_api_token")
#: A secret's name and what joins it to its value: `api_key=`, `'api_key': `, `HF_TOKEN: `.
_KEY_NAME = r"(?i)((?:api[_-]?key|hf_token|hugging_?face_hub_token|hf_api_token)['\"]?\s*[=:]\s*)"
# vLLM's list form, `'api_key': ['sk-1', 'sk-2']`, and a tuple, `api_key=('sk-1',)`: every item is masked.
_SEQUENCE = re.compile(_KEY_NAME + r"([\[(])([^\])\n]*)")
_ITEM = re.compile(r"(['\"])[^'\"]*\1|[^\s,'\"]+")

# Each pattern keeps the name (group 1) and any opening quote (group 2), and replaces the value. Each runs
# only when one of its hints is in the lowered line: most lines (`token usage: 0.41`) run none.
_PATTERNS = (
    # --api-key VALUE, --api-key=VALUE, --hf-token VALUE, --token VALUE
    (("--api", "--hf", "--token"),
     re.compile(r"(--(?:api[-_]key|hf[-_]token|token)(?:=|\s+))(['\"]?)[^\s'\"]+")),
    # api_key='VALUE', "api_key": "VALUE", OPENAI_API_KEY=VALUE, HF_TOKEN=VALUE, HUGGING_FACE_HUB_TOKEN: VALUE
    # (a list or tuple of them is _SEQUENCE's: a value never starts with its bracket)
    (_KEY_HINTS, re.compile(_KEY_NAME + r"(['\"]?)(?![\[(]|\*\*\*)[^\s'\",)}\]]+")),
    # Authorization: Bearer VALUE (the scheme is hidden too: it says nothing useful without the value)
    (("authorization",),
     re.compile(r"(?i)(authorization['\"]?\s*[=:]\s*)(['\"]?)(?:(?:bearer|basic|token)\s+)?[^\s'\",)}\]]+")),
)
# A Hugging Face token wherever it stands: hf_ and at least 20 letters and digits.
_HF_TOKEN = re.compile(r"\bhf_[A-Za-z0-9]{20,}\b")


def _masked_items(m: re.Match[str]) -> str:
    """`'api_key': ['sk-1', "sk-2"]` -> `'api_key': ['***', "***"]`: each item masked, its quotes kept."""
    items = _ITEM.sub(lambda item: item.group(1) + MASK + item.group(1) if item.group(1) else MASK, m.group(3))
    return m.group(1) + m.group(2) + items


def redact(text: str) -> str:
    """The text with API keys, tokens and Authorization values replaced by `***`.

    >>> redact("server_args=ServerArgs(api_key='sk-123', port=30000)")
    "server_args=ServerArgs(api_key='***', port=30000)"
    """
    low = text.lower()
    # Every hint below holds one of these words, which ordinary lines (`#token: 40961`) do not: most lines
    # cost these few scans at C speed.
    if not ("api" in low or "hf_" in low or "--hf" in low or "_token" in low or "--token" in low
            or "authoriz" in low):
        return text
    if any(hint in low for hint in _KEY_HINTS):
        text = _SEQUENCE.sub(_masked_items, text)
    for hints, pattern in _PATTERNS:
        if any(hint in low for hint in hints):
            text = pattern.sub(lambda m: m.group(1) + m.group(2) + MASK, text)
    return _HF_TOKEN.sub(MASK, text) if "hf_" in text else text

