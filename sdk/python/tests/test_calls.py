import json
import unittest

from otelcol_svc_agent import BodyError, SignatureError, parse_call, verify_webhook

from .helpers import REQUEST_ID, SECRET, signed_headers


def call(body, **kw):
    return parse_call(SECRET, signed_headers(body), body, **kw)


class ParseCallTest(unittest.TestCase):
    def test_batch(self):
        body = b'[{"_event_type":"payment.failed","amount":42},{"msg":"x"}]'
        c = call(body)
        self.assertFalse(c.is_window)
        self.assertEqual(c.request_id, REQUEST_ID)
        self.assertEqual(c.records, [{"_event_type": "payment.failed", "amount": 42}, {"msg": "x"}])
        self.assertIsNone(c.trigger)
        self.assertEqual(c.raw, body)

    def test_window(self):
        body = b'{"trigger":{"level":"error"},"window":[{"level":"info","i":1},{"level":"warn","i":2}]}'
        c = call(body)
        self.assertTrue(c.is_window)
        self.assertEqual(c.trigger, {"level": "error"})
        self.assertEqual([r["i"] for r in c.window], [1, 2])
        self.assertEqual(c.records, [])
        self.assertEqual(call(b'{"trigger":{"a":1},"window":[]}').window, [])

    def test_refuses_a_tampered_call(self):
        body = b'[{"amount":42}]'
        with self.assertRaises(SignatureError):
            parse_call(SECRET, signed_headers(body), b'[{"amount":4200}]')

    def test_bodies_that_are_not_calls(self):
        for body in (b"", b'{"a":1}', b'{"trigger":null,"window":[]}', b'"text"', b'[{"a":1}', b"[1] [2]",
                     b'{"trigger":{},"window":{}}', b"[NaN]"):
            with self.subTest(body=body), self.assertRaises(BodyError) as cm:
                call(body)
            self.assertEqual(cm.exception.status, 400)

    def test_secret_required_unless_unsigned_allowed(self):
        body = b'[{"a":1}]'
        with self.assertRaises(ValueError):
            parse_call("", {"X-Request-Id": REQUEST_ID}, body)
        c = parse_call("", {"X-Request-Id": REQUEST_ID}, body, allow_unsigned=True)
        self.assertEqual(c.records, [{"a": 1}])
        # A configured secret is checked even with allow_unsigned.
        with self.assertRaises(SignatureError):
            parse_call(SECRET, {"X-Request-Id": REQUEST_ID}, body, allow_unsigned=True)

    def test_request_id_falls_back_to_webhook_id(self):
        h = signed_headers(b"[]")
        del h["X-Request-Id"]
        self.assertEqual(parse_call(SECRET, h, b"[]").request_id, REQUEST_ID)
        with self.assertRaises(BodyError):
            parse_call("", {}, b"[]", allow_unsigned=True)


class VerifyWebhookTest(unittest.TestCase):
    def test_any_json_payload(self):
        for payload in ({"summary": "disk full", "hosts": ["a", "b"]}, "a plain string", [1, 2], None):
            body = json.dumps(payload).encode()
            wh = verify_webhook(SECRET, signed_headers(body), body)
            self.assertEqual((wh.request_id, wh.payload, wh.raw), (REQUEST_ID, payload, body))
        # A sink's delivery has its own webhook-id, the same on every attempt.
        body = b'{"ok":true}'
        headers = signed_headers(body, request_id="msg_42")
        headers["X-Request-Id"] = REQUEST_ID
        wh = verify_webhook(SECRET, headers, body)
        self.assertEqual((wh.request_id, wh.webhook_id), (REQUEST_ID, "msg_42"))

    def test_refused(self):
        body = b'{"ok":true}'
        with self.assertRaises(SignatureError):
            verify_webhook(SECRET, signed_headers(body), b'{"ok":false}')
        with self.assertRaises(BodyError):
            verify_webhook(SECRET, signed_headers(b"not json"), b"not json")


if __name__ == "__main__":
    unittest.main()
