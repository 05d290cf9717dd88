"""The README's example agent, run as a user would: a process called over HTTP."""

import json
import os
import socket
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

from .helpers import SECRET, Receiver, accepted, signed_headers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "agent.py")


# Records as the receiver stores them from OTLP (contract section 4): an error log, an
# info log, and a span that failed. Only severityNumber/severityText tell a log's level.
RESOURCE = {"service.name": "checkout", "k8s.namespace.name": "shop"}
ERROR_LOG = {"resourceAttributes": RESOURCE, "scope": {"name": "app.logger"}, "severityNumber": 17,
             "severityText": "ERROR", "body": "payment failed", "attributes": {"http.status_code": 502},
             "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
             "timestamp": "2024-05-01T12:00:00.123456789Z"}
INFO_LOG = {"resourceAttributes": RESOURCE, "scope": {"name": "app.logger"}, "severityNumber": 9,
            "severityText": "INFO", "body": "retrying", "attributes": {}, "traceId": "", "spanId": "",
            "timestamp": "2024-05-01T12:00:01.000000000Z"}
ERROR_SPAN = {"resourceAttributes": RESOURCE, "scope": {"name": "app.tracer"},
              "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "parentSpanId": "",
              "name": "POST /pay", "kind": "server", "startTime": "2024-05-01T12:00:00Z",
              "endTime": "2024-05-01T12:00:00.25Z", "durationMs": 250,
              "status": {"code": "error", "message": "upstream 502"}, "attributes": {}, "events": []}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ExampleAgentTest(unittest.TestCase):
    def test_readme_shows_the_example(self):
        with open(EXAMPLE) as f, open(os.path.join(ROOT, "README.md")) as readme:
            self.assertIn(f.read(), readme.read(), "README.md and examples/agent.py differ")

    def test_agent_answers_and_sends_its_result(self):
        receiver = Receiver(accepted())
        self.addCleanup(receiver.close)
        port = free_port()
        env = dict(os.environ, PYTHONPATH=ROOT, PYTHONDONTWRITEBYTECODE="1", PORT=str(port),
                   OTELCOL_SVC_SIGNING_SECRET=SECRET, OTELCOL_SVC_API_KEY="sk_example",
                   OTELCOL_SVC_RECEIVER_URL=receiver.url)
        proc = subprocess.Popen([sys.executable, EXAMPLE], env=env, stderr=subprocess.DEVNULL)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)

        def post(body, headers):
            req = urllib.request.Request(f"http://127.0.0.1:{port}/", data=body, headers=headers, method="POST")
            for _ in range(100):  # until the agent listens
                try:
                    with urllib.request.urlopen(req, timeout=5) as resp:
                        return resp.status, resp.read()
                except urllib.error.HTTPError as e:
                    return e.code, e.read()
                except urllib.error.URLError:
                    time.sleep(0.05)
            self.fail("the example agent did not start listening")

        body = json.dumps({"trigger": ERROR_LOG, "window": [INFO_LOG, ERROR_SPAN]}).encode()
        self.assertEqual(post(body, signed_headers(body)), (200, b'{"status":"accepted"}'))
        forged = body.replace(b"retrying", b"recovered")
        self.assertEqual(post(forged, signed_headers(body))[0], 401)

        for _ in range(100):
            if receiver.requests:
                break
            time.sleep(0.05)
        self.assertEqual(len(receiver.requests), 1, "the forged call must not produce a result")
        _, headers, sent = receiver.requests[0]
        self.assertEqual(headers["X-API-Key"], "sk_example")
        self.assertEqual(json.loads(sent), {"request_id": signed_headers(body)["X-Request-Id"],
                                            "payload": {"records": 3, "errors": 2}})


if __name__ == "__main__":
    unittest.main()
