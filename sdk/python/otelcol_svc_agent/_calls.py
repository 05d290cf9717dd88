"""Calls of the collector to the agent, and webhook sink deliveries."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

from ._signature import DEFAULT_TOLERANCE, HEADER_ID, Body, _bytes, header, verify


class BodyError(Exception):
    """The body is not a call (or, for a webhook, not JSON): answer it with ``status``."""

    status = 400


@dataclass(frozen=True)
class Call:
    """One verified call. Batch mode fills ``records``; window mode ``trigger`` and ``window``."""

    request_id: str
    """Quote it in Client.send_result. Retries of a call carry the same id: drop duplicates by it."""
    records: List[Any] = field(default_factory=list)
    trigger: Optional[Any] = None
    window: List[Any] = field(default_factory=list)
    """The records of the trigger's group that came before it, oldest first."""
    raw: bytes = b""

    @property
    def is_window(self) -> bool:
        return self.trigger is not None


@dataclass(frozen=True)
class Webhook:
    """One verified delivery of a webhook sink: an agent's result, any JSON value."""

    request_id: str
    payload: Any
    raw: bytes
    webhook_id: str = ""
    """Names the delivery; the same on every attempt and redelivery: deduplicate by it."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _verified(secret: str, headers: Any, body: Body, tolerance: float, allow_unsigned: bool) -> Tuple[bytes, str, Any]:
    raw = _bytes(body)
    if secret:
        verify(secret, headers, raw, tolerance)
    elif not allow_unsigned:
        # A secret that failed to load must not switch verification off silently.
        raise ValueError("no webhook secret configured: pass the project's whsec_... signing secret, "
                         "or allow_unsigned=True for local development")
    # X-Request-Id is what the receiver expects back. A call's webhook-id carries the
    # same value, so it stands in for a sender that sets only the Standard Webhooks headers.
    request_id = header(headers, "x-request-id") or header(headers, HEADER_ID)
    if not request_id:
        raise BodyError("the X-Request-Id header is missing, so the result could not be matched to the call")
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except ValueError as e:
        raise BodyError(f"the body is not JSON: {e}") from None
    return raw, request_id, value


def parse_call(secret: str, headers: Any, body: Body, *, tolerance: float = DEFAULT_TOLERANCE,
               allow_unsigned: bool = False) -> Call:
    """Verifies a call of the collector and decodes it.

    ``headers`` is the request's header mapping (any case), ``body`` its raw bytes. The
    body is a JSON array of records (batch mode) or ``{"trigger": <record>, "window":
    [<records>]}`` (window mode). Raises SignatureError (401) or BodyError (400); an empty
    ``secret`` raises ValueError unless ``allow_unsigned``.
    """
    raw, request_id, value = _verified(secret, headers, body, tolerance, allow_unsigned)
    if isinstance(value, list):
        return Call(request_id=request_id, records=value, raw=raw)
    if isinstance(value, dict):
        trigger, window = value.get("trigger"), value.get("window")
        if window is None:
            window = []
        if trigger is None:
            raise BodyError('a window call without "trigger"')
        if not isinstance(window, list):
            raise BodyError('"window" of a window call is not an array')
        return Call(request_id=request_id, trigger=trigger, window=window, raw=raw)
    raise BodyError("expected a JSON array of records or a window call object")


def verify_webhook(secret: str, headers: Any, body: Body, *, tolerance: float = DEFAULT_TOLERANCE,
                   allow_unsigned: bool = False) -> Webhook:
    """Verifies a webhook sink's delivery and returns its payload (parsed) and raw bytes."""
    raw, request_id, value = _verified(secret, headers, body, tolerance, allow_unsigned)
    return Webhook(request_id=request_id, payload=value, raw=raw, webhook_id=header(headers, HEADER_ID))
