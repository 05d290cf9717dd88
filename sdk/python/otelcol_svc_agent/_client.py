"""Sending the agent's result to the receiver's /internal/agent-output."""

from __future__ import annotations

import http.client
import json
import random
import time
import urllib.error
import urllib.request
from typing import Any, Optional

from . import __version__

OUTPUT_PATH = "/internal/agent-output"
DEFAULT_MAX_ATTEMPTS = 4
# A longer Retry-After (a monthly quota, say) is not worth blocking the agent for: the
# ApiError is raised at once, with retry_after set, and the agent decides.
MAX_RETRY_WAIT = 30.0
_FIRST_BACKOFF = 0.25  # seconds before the first retry without Retry-After; doubles


class ApiError(Exception):
    """An error answer of the receiver: ``{"error": {"code", "message"}}``."""

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[float] = None) -> None:
        super().__init__(f"otelcol-svc receiver answered {status} {code or 'error'}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


def _payload_json(payload: Any) -> bytes:
    if isinstance(payload, (bytes, bytearray, memoryview)):
        raw = bytes(payload)
        try:
            json.loads(raw)
        except ValueError as e:
            raise ValueError(f"the payload bytes are not valid JSON: {e}") from None
        return raw
    # allow_nan=False: NaN is not JSON, and the receiver would refuse the whole result.
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


class Client:
    """Sends results to an otelcol-svc receiver with one of the project's API keys."""

    def __init__(self, receiver_url: str, api_key: str, *, timeout: float = 30.0,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> None:
        if not receiver_url or not api_key:
            raise ValueError("Client needs receiver_url and api_key")
        self.url = receiver_url.rstrip("/") + OUTPUT_PATH
        self.api_key = api_key
        self.timeout = timeout
        self.max_attempts = max(1, max_attempts)

    def send_result(self, payload: Any, request_id: str) -> Any:
        """Posts ``payload`` as the result of the call ``request_id``; returns the answer.

        ``payload`` is any JSON-serialisable value; bytes are sent as they are and must
        be JSON. Connection errors, 429 and 5xx are retried with backoff, honouring
        Retry-After. Other answers raise ApiError at once; a connection error that
        outlasts the retries is raised as it is.
        """
        if not request_id:
            raise ValueError("request_id is empty; pass the request_id of the call the result answers")
        body = b'{"request_id":' + json.dumps(request_id).encode() + b',"payload":' + _payload_json(payload) + b"}"
        backoff = _FIRST_BACKOFF
        for attempt in range(1, self.max_attempts + 1):
            try:
                return self._post(body, request_id)
            except ApiError as e:
                transient = e.status == 429 or e.status >= 500
                if not transient or attempt == self.max_attempts or (e.retry_after or 0) > MAX_RETRY_WAIT:
                    raise
                wait = e.retry_after
            except (urllib.error.URLError, http.client.HTTPException, OSError):
                if attempt == self.max_attempts:
                    raise
                wait = None
            if wait is None:
                # Jitter spreads the retries of agents that failed together.
                wait = backoff / 2 + random.uniform(0, backoff / 2)
                backoff *= 2
            time.sleep(wait)
        raise AssertionError("unreachable")

    def _post(self, body: bytes, request_id: str) -> Any:
        req = urllib.request.Request(self.url, data=body, method="POST", headers={
            "Content-Type": "application/json",
            "X-API-Key": self.api_key,
            "X-Request-Id": request_id,
            "User-Agent": f"otelcol-svc-agent-python/{__version__}",
        })
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                answer = resp.read()
        except urllib.error.HTTPError as e:
            raise _api_error(e.code, e.headers, e.read()) from None
        try:
            return json.loads(answer)
        except ValueError:
            return {}


def _api_error(status: int, headers: Any, answer: bytes) -> ApiError:
    code, message = "", ""
    try:
        err = json.loads(answer)["error"]
        code, message = str(err["code"]), str(err.get("message", ""))
    except (ValueError, KeyError, TypeError):
        # Not the receiver's shape (a proxy's page, say): show its start.
        message = answer.decode("utf-8", "replace").strip()
        message = message[:200] + "..." if len(message) > 200 else message
        message = message or "the answer had no body"
    retry_after = None
    ra = (headers.get("Retry-After") or "").strip() if headers is not None else ""
    if ra.isascii() and ra.isdigit() and int(ra) > 0:
        retry_after = float(ra)
    return ApiError(status, code, message, retry_after)
