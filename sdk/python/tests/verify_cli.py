"""Used by sdk/crosslang_test.go: parses a call with this SDK as an agent would.

Usage: python3 verify_cli.py <secret> <headers as a JSON object>, the body on stdin.
Prints {"request_id", "window", "records"} and exits 0 when the call verifies; prints
"refused: <reason>" and exits 1 when it does not; anything else is a failure.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from otelcol_svc_agent import SignatureError, parse_call  # noqa: E402

secret, headers = sys.argv[1], json.loads(sys.argv[2])
try:
    call = parse_call(secret, headers, sys.stdin.buffer.read())
except SignatureError as e:
    print(f"refused: {e.reason}")
    sys.exit(1)
n = len(call.window) if call.is_window else len(call.records)
print(json.dumps({"request_id": call.request_id, "window": call.is_window, "records": n}))
