// What the tests share: signed calls as the collector sends them, and a fake receiver.
import http from "node:http";
import { sign } from "../index.js";

export const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
export const OTHER_SECRET = "whsec_c2VjcmV0LW9mLWFub3RoZXItcHJvamVjdA==";
export const REQUEST_ID = "req_5f0c3b1e9a7d4c2b8e6f1a0d3c5b7e9f";

/** The headers of a call, as the agent exporter sets them (canonical case). */
export function signedHeaders(body, { secret = SECRET, timestamp = Math.floor(Date.now() / 1000), requestId = REQUEST_ID } = {}) {
  return {
    "Content-Type": "application/json",
    "X-Request-Id": requestId,
    "Webhook-Id": requestId,
    "Webhook-Timestamp": String(timestamp),
    "Webhook-Signature": sign(secret, requestId, timestamp, body),
  };
}

/**
 * Plays /internal/agent-output: records requests and answers with the next answer
 * ({status, headers, body}, or null to drop the connection); the last one repeats.
 */
export async function receiver(t, ...answers) {
  const requests = [];
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const n = requests.length;
    requests.push({ path: req.url, headers: req.headers, body: Buffer.concat(chunks).toString() });
    const a = answers[Math.min(n, answers.length - 1)];
    if (a === null) return req.socket.destroy();
    res.writeHead(a.status, a.headers ?? {}).end(a.body ?? "");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }));
  return { url: `http://127.0.0.1:${server.address().port}`, requests };
}

export const accepted = { status: 202, headers: { "Content-Type": "application/json" }, body: JSON.stringify({ accepted: true, request_id: REQUEST_ID }) };

export function error(status, code, message, retryAfter) {
  const headers = { "Content-Type": "application/json" };
  if (retryAfter !== undefined) headers["Retry-After"] = String(retryAfter);
  return { status, headers, body: JSON.stringify({ error: { code, message } }) };
}
