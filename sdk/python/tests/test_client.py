import time
import unittest
import urllib.error
from unittest import mock

from otelcol_svc_agent import ApiError, Client, _client

from .helpers import REQUEST_ID, Receiver, accepted, error


class ClientTest(unittest.TestCase):
    def receiver(self, *answers):
        r = Receiver(*answers)
        self.addCleanup(r.close)
        return r

    def fast_backoff(self):
        p = mock.patch.object(_client, "_FIRST_BACKOFF", 0.001)
        p.start()
        self.addCleanup(p.stop)

    def test_request(self):
        r = self.receiver(accepted())
        answer = Client(r.url + "/", "sk_test_1").send_result({"summary": "p95 > 2s", "severity": "high"}, REQUEST_ID)
        self.assertEqual(answer, {"accepted": True, "request_id": REQUEST_ID})
        path, headers, body = r.requests[0]
        self.assertEqual(path, "/internal/agent-output")
        self.assertEqual(headers["X-API-Key"], "sk_test_1")
        self.assertEqual(headers["Content-Type"], "application/json")
        self.assertEqual(body, b'{"request_id":"' + REQUEST_ID.encode()
                         + b'","payload":{"summary":"p95 > 2s","severity":"high"}}')

    def test_bytes_payload_sent_as_is(self):
        r = self.receiver(accepted())
        c = Client(r.url, "k")
        c.send_result(b'{ "n": 1.50 }', REQUEST_ID)
        self.assertEqual(r.requests[0][2], b'{"request_id":"' + REQUEST_ID.encode() + b'","payload":{ "n": 1.50 }}')
        with self.assertRaises(ValueError):
            c.send_result(b'{"a":', REQUEST_ID)
        with self.assertRaises(ValueError):
            c.send_result(float("nan"), REQUEST_ID)
        self.assertEqual(len(r.requests), 1, "an invalid payload must not be sent")

    def test_retries_503_after_retry_after(self):
        r = self.receiver(error(503, "unavailable", "try again", retry_after=1), accepted())
        start = time.monotonic()
        Client(r.url, "k").send_result("done", REQUEST_ID)
        self.assertEqual(len(r.requests), 2)
        self.assertGreaterEqual(time.monotonic() - start, 0.95, "retried before the Retry-After of 1s")
        self.assertEqual(r.requests[0][2], r.requests[1][2])

    def test_api_error_on_401(self):
        r = self.receiver(error(401, "invalid_api_key", "the API key is not valid"))
        with self.assertRaises(ApiError) as cm:
            Client(r.url, "wrong").send_result({"a": 1}, REQUEST_ID)
        e = cm.exception
        self.assertEqual((e.status, e.code, e.message), (401, "invalid_api_key", "the API key is not valid"))
        self.assertIn("invalid_api_key", str(e))
        self.assertEqual(len(r.requests), 1, "a 401 must not be retried")

    def test_gives_up_after_max_attempts(self):
        self.fast_backoff()
        r = self.receiver((502, {"Content-Type": "text/html"}, b"<html>bad gateway</html>"))
        with self.assertRaises(ApiError) as cm:
            Client(r.url, "k", max_attempts=3).send_result(1, REQUEST_ID)
        self.assertEqual((cm.exception.status, cm.exception.message), (502, "<html>bad gateway</html>"))
        self.assertEqual(len(r.requests), 3)

    def test_does_not_wait_out_a_long_retry_after(self):
        r = self.receiver(error(429, "quota_exceeded", "monthly quota used up", retry_after=3600))
        start = time.monotonic()
        with self.assertRaises(ApiError) as cm:
            Client(r.url, "k").send_result(1, REQUEST_ID)
        self.assertEqual((cm.exception.code, cm.exception.retry_after), ("quota_exceeded", 3600))
        self.assertEqual(len(r.requests), 1)
        self.assertLess(time.monotonic() - start, 5)

    def test_retries_a_dropped_connection(self):
        self.fast_backoff()
        r = self.receiver(None, accepted())
        Client(r.url, "k").send_result(1, REQUEST_ID)
        self.assertEqual(len(r.requests), 2)

    def test_unreachable_receiver_raises_the_connection_error(self):
        self.fast_backoff()
        r = self.receiver(accepted())
        url = r.url
        r.close()
        with self.assertRaises(urllib.error.URLError):
            Client(url, "k", max_attempts=2).send_result(1, REQUEST_ID)

    def test_needs_a_request_id(self):
        with self.assertRaises(ValueError):
            Client("http://127.0.0.1:1", "k").send_result(1, "")


if __name__ == "__main__":
    unittest.main()
