import time
import unittest

from otelcol_svc_agent import SignatureError, sign, verify

from .helpers import OTHER_SECRET, SECRET, signed_headers

BODY = b'[{"_event_type":"payment.failed","amount":42}]'


class SignTest(unittest.TestCase):
    def test_matches_the_standard_webhooks_example(self):
        # The example of the Standard Webhooks specification's reference libraries.
        got = sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
                   '{"test": 2432232314}')
        self.assertEqual(got, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")

    def test_secret_prefix_is_optional(self):
        self.assertEqual(sign(SECRET, "id", 1, b"x"), sign(SECRET[len("whsec_"):], "id", 1, b"x"))

    def test_invalid_secret(self):
        for secret in ("", "whsec_", "whsec_not base64!", "whsec_abc"):
            with self.subTest(secret=secret), self.assertRaises(ValueError):
                sign(secret, "id", 1, b"x")


class VerifyTest(unittest.TestCase):
    def assertRefused(self, reason, headers, body=BODY, secret=SECRET, **kw):
        with self.assertRaises(SignatureError) as cm:
            verify(secret, headers, body, **kw)
        self.assertEqual(cm.exception.reason, reason, str(cm.exception))
        self.assertEqual(cm.exception.status, 401)

    def test_valid(self):
        verify(SECRET, signed_headers(BODY), BODY)
        verify(SECRET, signed_headers(BODY), BODY.decode())  # str bodies are UTF-8

    def test_header_names_in_any_case(self):
        lower = {k.lower(): v for k, v in signed_headers(BODY).items()}
        verify(SECRET, lower, BODY)
        verify(SECRET, list(signed_headers(BODY).items()), BODY)
        # An ASGI scope's headers: (bytes, bytes) pairs.
        verify(SECRET, [(k.lower().encode(), v.encode()) for k, v in signed_headers(BODY).items()], BODY)

    def test_tampered_body(self):
        self.assertRefused("no_matching_signature", signed_headers(BODY), BODY.replace(b"42", b"4200"))

    def test_other_secret(self):
        self.assertRefused("no_matching_signature", signed_headers(BODY, secret=OTHER_SECRET))

    def test_changed_id(self):
        h = signed_headers(BODY)
        h["Webhook-Id"] = "req_other"
        self.assertRefused("no_matching_signature", h)

    def test_replayed_after_tolerance(self):
        self.assertRefused("timestamp_too_old", signed_headers(BODY, timestamp=int(time.time()) - 600))
        # A wider tolerance accepts it; a non-positive one means the default.
        verify(SECRET, signed_headers(BODY, timestamp=int(time.time()) - 600), BODY, tolerance=900)
        self.assertRefused("timestamp_too_old", signed_headers(BODY, timestamp=int(time.time()) - 600), tolerance=0)

    def test_timestamp_in_the_future(self):
        self.assertRefused("timestamp_too_new", signed_headers(BODY, timestamp=int(time.time()) + 600))

    def test_timestamp_not_unix_seconds(self):
        for ts in ("-1", "+1700000000", "1.5", "１７", "1234567890123"):
            h = signed_headers(BODY)
            h["Webhook-Timestamp"] = ts
            with self.subTest(ts=ts):
                self.assertRefused("invalid_timestamp", h)

    def test_missing_headers(self):
        for name in ("Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"):
            h = signed_headers(BODY)
            del h[name]
            with self.subTest(name=name):
                self.assertRefused("missing_header", h)

    def test_any_of_several_signatures(self):
        # During a secret rotation, one signature per secret; unknown versions skipped.
        h = signed_headers(BODY)
        old = signed_headers(BODY, secret=OTHER_SECRET)["Webhook-Signature"]
        h["Webhook-Signature"] = f"v2,abc v1,bm90LTMyLWJ5dGVz {old} {h['Webhook-Signature']}"
        verify(SECRET, h, BODY)

    def test_malformed_signature_header(self):
        h = signed_headers(BODY)
        h["Webhook-Signature"] = "garbage " + h["Webhook-Signature"]
        self.assertRefused("malformed_signature", h)
        h["Webhook-Signature"] = " ".join([signed_headers(BODY)["Webhook-Signature"]] * 17)
        self.assertRefused("malformed_signature", h)
        h["Webhook-Signature"] = "v2," + h["Webhook-Signature"][3:47]
        self.assertRefused("no_matching_signature", h)


if __name__ == "__main__":
    unittest.main()
