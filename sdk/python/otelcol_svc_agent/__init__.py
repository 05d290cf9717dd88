"""Python SDK for AI agents called by otelcol-svc (standard library only).

Receiving: ``parse_call`` verifies a call's Standard Webhooks signature and decodes its
body (batch: a JSON array of records; window: ``{"trigger", "window"}``);
``verify_webhook`` does the same for a webhook sink's delivery. Answering:
``Client(receiver_url, api_key).send_result(payload, request_id)``.
"""

__version__ = "0.1.0"

from ._signature import DEFAULT_TOLERANCE, SignatureError, sign, verify  # noqa: E402
from ._calls import BodyError, Call, Webhook, parse_call, verify_webhook  # noqa: E402
from ._client import ApiError, Client  # noqa: E402

__all__ = [
    "ApiError", "BodyError", "Call", "Client", "DEFAULT_TOLERANCE", "SignatureError",
    "Webhook", "parse_call", "sign", "verify", "verify_webhook",
]
