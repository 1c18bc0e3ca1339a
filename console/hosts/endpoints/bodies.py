"""An HTTP answer's body read as data: never more than a bound, and JSON of any shape as one error line.

A server can answer anything: a body of gigabytes (`/health` once made `status` hold 4.4 GB), or JSON
nested so deeply that Python's parser ends in RecursionError. Every body the console reads from a host
goes through `read_limited`, and every JSON body through `json_document`.
"""

from __future__ import annotations

import json

import aiohttp


async def read_limited(resp: aiohttp.ClientResponse, limit_bytes: int) -> bytes:
    """The body, or its first `limit_bytes` + 1 bytes when it is longer (so the caller can refuse it)."""
    chunks, size = [], 0
    async for chunk in resp.content.iter_chunked(1 << 16):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit_bytes:
            break
    return b"".join(chunks)


def json_document(body: bytes | str) -> object:
    """The JSON value of a body.

    Raises:
        ValueError: not JSON, or nested too deeply to read (one line, never a RecursionError).
    """
    try:
        return json.loads(body)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply to read") from None
