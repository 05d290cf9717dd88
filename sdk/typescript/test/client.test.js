import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiError, Client } from "../index.js";
import { REQUEST_ID, accepted, error, receiver } from "./helpers.js";

test("sendResult posts the result with the API key", async (t) => {
  const r = await receiver(t, accepted);
  const answer = await new Client(r.url + "/", "sk_test_1").sendResult({ summary: "p95 > 2s", severity: "high" }, REQUEST_ID);
  assert.deepEqual(answer, { accepted: true, request_id: REQUEST_ID });
  const [req] = r.requests;
  assert.equal(req.path, "/internal/agent-output");
  assert.equal(req.headers["x-api-key"], "sk_test_1");
  assert.equal(req.headers["content-type"], "application/json");
  assert.equal(req.body, `{"request_id":"${REQUEST_ID}","payload":{"summary":"p95 > 2s","severity":"high"}}`);
});

test("bytes are sent as they are, and must be JSON", async (t) => {
  const r = await receiver(t, accepted);
  const c = new Client(r.url, "k");
  await c.sendResult(Buffer.from('{ "n": 1.50 }'), REQUEST_ID);
  assert.equal(r.requests[0].body, `{"request_id":"${REQUEST_ID}","payload":{ "n": 1.50 }}`);
  await assert.rejects(c.sendResult(Buffer.from('{"a":'), REQUEST_ID), TypeError);
  await assert.rejects(c.sendResult(undefined, REQUEST_ID), TypeError);
  await assert.rejects(c.sendResult({}, ""), TypeError);
  assert.equal(r.requests.length, 1, "nothing invalid may be sent");
});

test("a 503 is retried after its Retry-After", async (t) => {
  const r = await receiver(t, error(503, "unavailable", "try again", 1), accepted);
  const start = performance.now();
  await new Client(r.url, "k").sendResult("done", REQUEST_ID);
  assert.equal(r.requests.length, 2);
  assert.ok(performance.now() - start >= 950, "retried before the Retry-After of 1s");
  assert.equal(r.requests[0].body, r.requests[1].body);
});

test("a 401 is an ApiError, not retried", async (t) => {
  const r = await receiver(t, error(401, "invalid_api_key", "the API key is not valid"));
  await assert.rejects(new Client(r.url, "wrong").sendResult({ a: 1 }, REQUEST_ID), (err) => {
    assert.ok(err instanceof ApiError);
    assert.deepEqual([err.status, err.code, err.message], [401, "invalid_api_key", "the API key is not valid"]);
    return true;
  });
  assert.equal(r.requests.length, 1);
});

test("5xx is retried up to maxAttempts", async (t) => {
  const r = await receiver(t, { status: 502, headers: { "Content-Type": "text/html" }, body: "<html>bad gateway</html>" });
  await assert.rejects(new Client(r.url, "k", { maxAttempts: 3, backoffMs: 1 }).sendResult(1, REQUEST_ID), (err) => {
    assert.deepEqual([err.status, err.code, err.message], [502, "", "<html>bad gateway</html>"]);
    return true;
  });
  assert.equal(r.requests.length, 3);
});

test("a long Retry-After is not waited out", async (t) => {
  const r = await receiver(t, error(429, "quota_exceeded", "monthly quota used up", 3600));
  const start = performance.now();
  await assert.rejects(new Client(r.url, "k").sendResult(1, REQUEST_ID), (err) => {
    assert.deepEqual([err.code, err.retryAfter], ["quota_exceeded", 3600]);
    return true;
  });
  assert.equal(r.requests.length, 1);
  assert.ok(performance.now() - start < 5000);
});

test("a dropped connection is retried", async (t) => {
  const r = await receiver(t, null, accepted);
  await new Client(r.url, "k", { backoffMs: 1 }).sendResult(1, REQUEST_ID);
  assert.equal(r.requests.length, 2);
});

test("an unreachable receiver rejects with the connection error", async (t) => {
  const r = await receiver(t, accepted);
  const url = r.url.replace(/:\d+$/, ":1");
  await assert.rejects(new Client(url, "k", { maxAttempts: 2, backoffMs: 1 }).sendResult(1, REQUEST_ID), (err) => !(err instanceof ApiError));
});
