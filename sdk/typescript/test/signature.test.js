import assert from "node:assert/strict";
import { test } from "node:test";
import { SignatureError, sign, verify } from "../index.js";
import { OTHER_SECRET, SECRET, signedHeaders } from "./helpers.js";

const BODY = Buffer.from('[{"_event_type":"payment.failed","amount":42}]');
const now = () => Math.floor(Date.now() / 1000);

function assertRefused(reason, headers, body = BODY, options) {
  assert.throws(() => verify(SECRET, headers, body, options), (err) => {
    assert.ok(err instanceof SignatureError, `${err}`);
    assert.equal(err.reason, reason, err.message);
    assert.equal(err.status, 401);
    return true;
  });
}

test("sign matches the Standard Webhooks example", () => {
  assert.equal(
    sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, '{"test": 2432232314}'),
    "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
  );
  assert.equal(sign(SECRET, "id", 1, "x"), sign(SECRET.slice("whsec_".length), "id", 1, "x"));
});

test("an invalid secret is a TypeError", () => {
  for (const secret of ["", "whsec_", "whsec_not base64!", "whsec_abc"]) {
    assert.throws(() => sign(secret, "id", 1, "x"), TypeError, secret);
    assert.throws(() => verify(secret, signedHeaders(BODY), BODY), TypeError, secret);
  }
});

test("a signed call verifies, with any body type and header case", () => {
  verify(SECRET, signedHeaders(BODY), BODY);
  verify(SECRET, signedHeaders(BODY), BODY.toString());
  verify(SECRET, signedHeaders(BODY), new Uint8Array(BODY));
  const lower = Object.fromEntries(Object.entries(signedHeaders(BODY)).map(([k, v]) => [k.toLowerCase(), v]));
  verify(SECRET, lower, BODY);
  verify(SECRET, new Headers(signedHeaders(BODY)), BODY);
  verify(SECRET, new Map(Object.entries(signedHeaders(BODY))), BODY);
});

test("a tampered body, another secret or another id is refused", () => {
  assertRefused("no_matching_signature", signedHeaders(BODY), Buffer.from(BODY.toString().replace("42", "4200")));
  assertRefused("no_matching_signature", signedHeaders(BODY, { secret: OTHER_SECRET }));
  assertRefused("no_matching_signature", { ...signedHeaders(BODY), "Webhook-Id": "req_other" });
});

test("timestamps outside the tolerance are refused", () => {
  assertRefused("timestamp_too_old", signedHeaders(BODY, { timestamp: now() - 600 }));
  assertRefused("timestamp_too_new", signedHeaders(BODY, { timestamp: now() + 600 }));
  verify(SECRET, signedHeaders(BODY, { timestamp: now() - 600 }), BODY, { tolerance: 900 });
  assertRefused("timestamp_too_old", signedHeaders(BODY, { timestamp: now() - 600 }), BODY, { tolerance: 0 });
  for (const ts of ["-1", "+1700000000", "1.5", "1e9", "1234567890123"]) {
    assertRefused("invalid_timestamp", { ...signedHeaders(BODY), "Webhook-Timestamp": ts });
  }
});

test("missing headers are refused", () => {
  for (const name of ["Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"]) {
    const h = signedHeaders(BODY);
    delete h[name];
    assertRefused("missing_header", h);
  }
});

test("any of several signatures matches; unknown versions are skipped", () => {
  const h = signedHeaders(BODY);
  const old = signedHeaders(BODY, { secret: OTHER_SECRET })["Webhook-Signature"];
  h["Webhook-Signature"] = `v2,abc v1,bm90LTMyLWJ5dGVz ${old} ${h["Webhook-Signature"]}`;
  verify(SECRET, h, BODY);
});

test("a malformed signature header is refused", () => {
  const good = signedHeaders(BODY)["Webhook-Signature"];
  assertRefused("malformed_signature", { ...signedHeaders(BODY), "Webhook-Signature": `garbage ${good}` });
  assertRefused("malformed_signature", { ...signedHeaders(BODY), "Webhook-Signature": Array(17).fill(good).join(" ") });
  // Buffer.from alone would decode this (it skips the "!"), so it must be refused.
  assertRefused("no_matching_signature", { ...signedHeaders(BODY), "Webhook-Signature": good.slice(0, 10) + "!" + good.slice(10) });
});
