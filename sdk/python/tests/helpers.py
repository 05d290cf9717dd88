"""What the tests share: signed calls as the collector sends them, and a fake receiver."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from otelcol_svc_agent import sign

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER_SECRET = "whsec_c2VjcmV0LW9mLWFub3RoZXItcHJvamVjdA=="
REQUEST_ID = "req_5f0c3b1e9a7d4c2b8e6f1a0d3c5b7e9f"


def signed_headers(body, secret=SECRET, timestamp=None, request_id=REQUEST_ID):
    """The headers of a call, as the agent exporter sets them (canonical case)."""
    ts = int(time.time()) if timestamp is None else timestamp
    return {
        "Content-Type": "application/json",
        "X-Request-Id": request_id,
        "Webhook-Id": request_id,
        "Webhook-Timestamp": str(ts),
        "Webhook-Signature": sign(secret, request_id, ts, body),
    }


class Receiver:
    """Plays /internal/agent-output: records requests, answers with the next answer.

    An answer is (status, headers, body), or None to drop the connection unanswered.
    The last answer repeats.
    """

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests = []  # (path, headers, body)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                n = len(receiver.requests)
                receiver.requests.append((self.path, self.headers, body))
                answer = receiver.answers[min(n, len(receiver.answers) - 1)]
                if answer is None:
                    self.close_connection = True
                    return
                status, headers, out = answer
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def accepted(request_id=REQUEST_ID):
    return 202, {"Content-Type": "application/json"}, json.dumps({"accepted": True, "request_id": request_id}).encode()


def error(status, code, message, retry_after=None):
    headers = {"Content-Type": "application/json"}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return status, headers, json.dumps({"error": {"code": code, "message": message}}).encode()
