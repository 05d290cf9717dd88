import assert from "node:assert/strict";
import { test } from "node:test";
import { BodyError, SignatureError, parseCall, verifyWebhook } from "../index.js";
import { REQUEST_ID, SECRET, signedHeaders } from "./helpers.js";

const call = (body, options) => parseCall(SECRET, signedHeaders(body), Buffer.from(body), options);

test("batch call", () => {
  const body = '[{"_event_type":"payment.failed","amount":42},{"msg":"x"}]';
  const c = call(body);
  assert.equal(c.isWindow, false);
  assert.equal(c.requestId, REQUEST_ID);
  assert.deepEqual(c.records, [{ _event_type: "payment.failed", amount: 42 }, { msg: "x" }]);
  assert.equal(c.trigger, null);
  assert.equal(c.raw.toString(), body);
});

test("window call", () => {
  const c = call('{"trigger":{"level":"error"},"window":[{"level":"info","i":1},{"level":"warn","i":2}]}');
  assert.equal(c.isWindow, true);
  assert.deepEqual(c.trigger, { level: "error" });
  assert.deepEqual(c.window.map((r) => r.i), [1, 2]);
  assert.deepEqual(c.records, []);
  assert.deepEqual(call('{"trigger":{"a":1},"window":[]}').window, []);
});

test("a tampered call is refused", () => {
  const body = '[{"amount":42}]';
  assert.throws(() => parseCall(SECRET, signedHeaders(body), '[{"amount":4200}]'), SignatureError);
});

test("bodies that are not calls are BodyErrors (400)", () => {
  for (const body of ["", '{"a":1}', '{"trigger":null,"window":[]}', '"text"', '[{"a":1}', "[1] [2]", '{"trigger":{},"window":{}}', "[NaN]"]) {
    assert.throws(() => call(body), (err) => err instanceof BodyError && err.status === 400, body);
  }
});

test("a secret is required unless unsigned calls are allowed", () => {
  const headers = { "x-request-id": REQUEST_ID };
  assert.throws(() => parseCall("", headers, '[{"a":1}]'), TypeError);
  assert.deepEqual(parseCall("", headers, '[{"a":1}]', { allowUnsigned: true }).records, [{ a: 1 }]);
  // A configured secret is checked even with allowUnsigned.
  assert.throws(() => parseCall(SECRET, headers, '[{"a":1}]', { allowUnsigned: true }), SignatureError);
});

test("the request id falls back to webhook-id", () => {
  const h = signedHeaders("[]");
  delete h["X-Request-Id"];
  assert.equal(parseCall(SECRET, h, "[]").requestId, REQUEST_ID);
  assert.throws(() => parseCall("", {}, "[]", { allowUnsigned: true }), BodyError);
});

test("verifyWebhook takes any JSON payload", () => {
  for (const payload of [{ summary: "disk full", hosts: ["a", "b"] }, "a plain string", [1, 2], null]) {
    const body = JSON.stringify(payload);
    const wh = verifyWebhook(SECRET, signedHeaders(body), Buffer.from(body));
    assert.deepEqual([wh.requestId, wh.payload, wh.raw.toString()], [REQUEST_ID, payload, body]);
  }
  // A sink's delivery has its own webhook-id, the same on every attempt.
  const h = { ...signedHeaders('{"ok":true}', { requestId: "msg_42" }), "X-Request-Id": REQUEST_ID };
  const wh = verifyWebhook(SECRET, h, '{"ok":true}');
  assert.deepEqual([wh.requestId, wh.webhookId], [REQUEST_ID, "msg_42"]);
  assert.throws(() => verifyWebhook(SECRET, signedHeaders('{"ok":true}'), '{"ok":false}'), SignatureError);
  assert.throws(() => verifyWebhook(SECRET, signedHeaders("not json"), "not json"), BodyError);
});
