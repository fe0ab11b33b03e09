"""One POST to a webhook, bounded: the server's calls out (admission webhooks, wake
webhooks: docs/operating.md#admission-webhooks, docs/reference.md#wake-webhooks).

A redirect is not followed (a 3xx is an answer like any other non-2xx: following it
would re-send as GET, or carry the request somewhere its owner did not name); the
timeout bounds the connect and each read, and the whole exchange is checked against it
too; at most ``RESPONSE_MAX_BYTES`` of the answer are read, and dropped: only the status
decides.
"""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

RESPONSE_MAX_BYTES = 1024 * 1024
_READ_CHUNK_BYTES = 64 * 1024


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def webhook_post(
    url: str,
    body: bytes,
    *,
    headers: Mapping[str, str],
    timeout: float,
    timed_out: str,
    max_bytes: int = RESPONSE_MAX_BYTES,
) -> str | None:
    """POST ``body`` to ``url``; None for a 2xx answer, else what went wrong, in words
    (``timed_out`` when ``timeout`` seconds passed). Never raises for what the far end
    does."""
    request = urllib.request.Request(url, data=body, method="POST", headers=dict(headers))
    deadline = time.monotonic() + timeout
    try:
        with _opener.open(request, timeout=timeout) as response:
            status: int = response.status
            read = 0
            while read < max_bytes:
                if time.monotonic() > deadline:
                    return timed_out
                chunk = response.read(min(_READ_CHUNK_BYTES, max_bytes - read))
                if not chunk:
                    break
                read += len(chunk)
    except urllib.error.HTTPError as exc:
        exc.close()
        return f"answered HTTP {exc.code}"
    except TimeoutError:
        return timed_out
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            return timed_out
        return f"is unreachable: {exc.reason}"
    except (OSError, http.client.HTTPException) as exc:
        # A connection reset mid-answer, or a malformed status line.
        return f"is unreachable: {exc}"
    if not 200 <= status < 300:
        return f"answered HTTP {status}"
    return None
