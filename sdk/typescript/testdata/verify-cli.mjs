// Used by sdk/crosslang_test.go: parses a call with this SDK as an agent would.
// Usage: node verify-cli.mjs <secret> <headers as a JSON object>, the body on stdin.
// Prints {"request_id", "window", "records"} and exits 0 when the call verifies; prints
// "refused: <reason>" and exits 1 when it does not; anything else is a failure.
import { readFileSync } from "node:fs";
import { SignatureError, parseCall } from "../index.js";

const [secret, headers] = process.argv.slice(2);
const body = readFileSync(0);
try {
  const call = parseCall(secret, JSON.parse(headers), body);
  const n = call.isWindow ? call.window.length : call.records.length;
  console.log(JSON.stringify({ request_id: call.requestId, window: call.isWindow, records: n }));
} catch (err) {
  if (!(err instanceof SignatureError)) throw err;
  console.log(`refused: ${err.reason}`);
  process.exit(1);
}
