"""The continue token of a paged list: where the next page starts, opaque to the client as on the real server.

Its own room because the token's encoding is a wire format (base64 of JSON) that only `Store.list` writes and
reads; a token the store did not write is a 400, never a crash.
"""

from __future__ import annotations

import base64
import binascii
import json

from . import errors

Key = tuple[str, str]


def encode_continue(rv: int, start: Key) -> str:
    """The token for a next page starting after ``start`` (namespace, name) of a list at ``rv``."""
    raw = json.dumps({"rv": rv, "start": list(start)}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_continue(token: str | None) -> Key | None:
    """The (namespace, name) after which the page starts, None for the first page; 400 for a bad token."""
    if not token:
        return None
    try:
        start = json.loads(base64.urlsafe_b64decode(token.encode()))["start"]
        return (str(start[0]), str(start[1]))
    except (ValueError, KeyError, IndexError, TypeError, binascii.Error):
        raise errors.bad_request("continue key is not valid") from None
