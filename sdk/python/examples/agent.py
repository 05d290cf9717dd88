import os, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from otelcol_svc_agent import BodyError, Client, SignatureError, parse_call

SECRET = os.environ["OTELCOL_SVC_SIGNING_SECRET"]  # the project's whsec_... secret
client = Client(os.environ.get("OTELCOL_SVC_RECEIVER_URL", "http://localhost:4318"), os.environ["OTELCOL_SVC_API_KEY"])

def is_error(r):  # an OTLP log at ERROR or above (severityNumber 17+), a failed span or event
    status = r.get("status")
    code = status.get("code") if isinstance(status, dict) else status
    severity = r.get("severityNumber")
    return ((isinstance(severity, int) and severity >= 17) or str(r.get("severityText", "")).upper() in ("ERROR", "FATAL")
            or bool(r.get("error")) or code in ("error", "failed", "STATUS_CODE_ERROR"))

def analyse(call):  # your agent: here, count the errors among the records
    records = [call.trigger, *call.window] if call.is_window else call.records
    return {"records": len(records), "errors": sum(is_error(r) for r in records)}

class Agent(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            call = parse_call(SECRET, self.headers, body)
        except (SignatureError, BodyError) as e:
            return self.send_error(e.status, str(e))
        self.send_response(200)  # answer at once; the result goes to the receiver later
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"status":"accepted"}')
        threading.Thread(target=client.send_result, args=(analyse(call), call.request_id)).start()

ThreadingHTTPServer(("", int(os.environ.get("PORT", "8000"))), Agent).serve_forever()
