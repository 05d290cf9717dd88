"""Standard Webhooks signatures, as internal/webhooksig signs and checks them."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import time
from typing import Any, Union

SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE = 300  # seconds; the replay window of the Standard Webhooks libraries
HEADER_ID = "webhook-id"
HEADER_TIMESTAMP = "webhook-timestamp"
HEADER_SIGNATURE = "webhook-signature"

_MAX_SIGNATURES = 16  # bounds the work one forged header can cause
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_UNIX_SECONDS = re.compile(r"[0-9]{1,12}")

Body = Union[bytes, bytearray, memoryview, str]


class SignatureError(Exception):
    """The request is not signed with the secret, or too long ago: answer it with 401.

    ``reason`` says why: missing_header, invalid_timestamp, timestamp_too_old,
    timestamp_too_new, malformed_signature or no_matching_signature.
    """

    status = 401

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _b64decode(s: str) -> bytes:
    # Strict standard base64, as Go's base64.StdEncoding (which skips CR and LF).
    s = s.replace("\r", "").replace("\n", "")
    if not _BASE64.fullmatch(s):
        raise ValueError("not standard base64")
    try:
        return base64.b64decode(s, validate=True)
    except binascii.Error as e:
        raise ValueError(str(e)) from None


def _key(secret: str) -> bytes:
    # The prefix is optional, as in the reference libraries, so a secret pasted without
    # it keeps working.
    b64 = secret[len(SECRET_PREFIX):] if secret.startswith(SECRET_PREFIX) else secret
    if not b64:
        raise ValueError(f"webhook secret is not valid: it is empty; expected {SECRET_PREFIX!r} followed by base64")
    try:
        key = _b64decode(b64)
    except ValueError:
        raise ValueError(f"webhook secret is not valid: the part after {SECRET_PREFIX!r} is not standard base64") from None
    if not key:
        raise ValueError("webhook secret is not valid: the key is empty")
    return key


def _bytes(body: Body) -> bytes:
    if isinstance(body, str):
        return body.encode("utf-8")
    return bytes(body)


def _text(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        v = v[0] if v else ""
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("latin-1")
    return "" if v is None else str(v)


def header(headers: Any, name: str) -> str:
    """Returns a header's first value, whatever the case of its name.

    ``headers`` may be a dict, http.server's ``self.headers``, a framework's header
    mapping, or a list of (name, value) pairs such as an ASGI scope's.
    """
    get = getattr(headers, "get", None)
    if callable(get):
        v = _text(get(name))
        if v:
            return v
    pairs = headers.items() if hasattr(headers, "items") else headers
    for k, v in pairs:
        if _text(k).lower() == name.lower():
            return _text(v)
    return ""


def _mac(key: bytes, msg_id: str, timestamp: str, body: bytes) -> bytes:
    return hmac.new(key, msg_id.encode() + b"." + timestamp.encode() + b"." + body, hashlib.sha256).digest()


def sign(secret: str, msg_id: str, timestamp: int, body: Body) -> str:
    """Returns the webhook-signature value for a message, e.g. to test an agent."""
    mac = _mac(_key(secret), msg_id, str(int(timestamp)), _bytes(body))
    return "v1," + base64.b64encode(mac).decode()


def verify(secret: str, headers: Any, body: Body, tolerance: float = DEFAULT_TOLERANCE) -> None:
    """Checks a request's Standard Webhooks signature; raises SignatureError if it fails.

    The webhook-id and webhook-timestamp headers must be present, the timestamp within
    ``tolerance`` seconds of this machine's clock (the default when ``tolerance <= 0``),
    and one of the space-separated ``v1,`` signatures must match the raw body. An invalid
    secret raises ValueError.
    """
    key = _key(secret)
    msg_id = header(headers, HEADER_ID)
    ts = header(headers, HEADER_TIMESTAMP)
    sigs = header(headers, HEADER_SIGNATURE)
    missing = [n for n, v in ((HEADER_ID, msg_id), (HEADER_TIMESTAMP, ts), (HEADER_SIGNATURE, sigs)) if not v]
    if missing:
        raise SignatureError("missing_header", "webhook signature header missing: " + ", ".join(missing))
    _check_timestamp(ts, tolerance)
    want = _mac(key, msg_id, ts, _bytes(body))
    for candidate in _signatures(sigs):
        if hmac.compare_digest(candidate, want):
            return
    raise SignatureError("no_matching_signature", "no webhook signature matches")


def _check_timestamp(ts: str, tolerance: float) -> None:
    if tolerance <= 0:
        tolerance = DEFAULT_TOLERANCE
    if not _UNIX_SECONDS.fullmatch(ts):
        raise SignatureError("invalid_timestamp", f"webhook timestamp is not valid: {ts!r} is not unix seconds")
    at, now = int(ts), time.time()
    if at < now - tolerance:
        raise SignatureError("timestamp_too_old", f"webhook timestamp is too old: {at}, more than {tolerance:g}s before now")
    if at > now + tolerance:
        raise SignatureError("timestamp_too_new", f"webhook timestamp is too far in the future: {at}, more than {tolerance:g}s after now")


def _signatures(value: str) -> list[bytes]:
    fields = value.split()
    if len(fields) > _MAX_SIGNATURES:
        raise SignatureError("malformed_signature", f"webhook signature header is malformed: more than {_MAX_SIGNATURES} signatures")
    out = []
    for f in fields:
        version, comma, sig = f.partition(",")
        if not comma:
            raise SignatureError("malformed_signature", f"webhook signature header is malformed: {f[:40]!r} is not <version>,<base64>")
        if version != "v1":
            continue  # other schemes may be added by the sender; they must not break us
        try:
            b = _b64decode(sig)
        except ValueError:
            continue  # a malformed candidate never matches; look at the others
        if len(b) == hashlib.sha256().digest_size:
            out.append(b)
    if not out:
        raise SignatureError("no_matching_signature", "no webhook signature matches")
    return out
