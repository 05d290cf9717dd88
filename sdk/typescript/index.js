// otelcol-svc agent SDK: verify the collector's calls and webhook deliveries (Standard
// Webhooks, as internal/webhooksig signs them) and send agent results back.
// No dependencies: node:crypto and the global fetch (Node 18+).
import { createHmac, timingSafeEqual } from "node:crypto";

export const VERSION = "0.1.0";
export const DEFAULT_TOLERANCE = 300; // seconds; the replay window of the Standard Webhooks libraries
export const OUTPUT_PATH = "/internal/agent-output";

const SECRET_PREFIX = "whsec_";
const MAX_SIGNATURES = 16; // bounds the work one forged header can cause
// A longer Retry-After (a monthly quota, say) is not worth blocking the agent for: the
// ApiError is thrown at once, with retryAfter set, and the agent decides.
const MAX_RETRY_WAIT = 30;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const UNIX_SECONDS = /^[0-9]{1,12}$/;

/** The request is not signed with the secret, or too long ago: answer it with 401. */
export class SignatureError extends Error {
  constructor(reason, message) {
    super(message);
    this.name = "SignatureError";
    this.reason = reason;
    this.status = 401;
  }
}

/** The body is not a call (or, for a webhook, not JSON): answer it with 400. */
export class BodyError extends Error {
  constructor(message) {
    super(message);
    this.name = "BodyError";
    this.status = 400;
  }
}

/** An error answer of the receiver: {"error": {"code", "message"}}. */
export class ApiError extends Error {
  constructor(status, code, message, retryAfter) {
    // message is the receiver's sentence, as in the Go and Python SDKs; node prints
    // status and code beside it when the error is logged.
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

// Strict standard base64, as Go's base64.StdEncoding (which skips CR and LF); Buffer
// alone would silently drop characters that are not base64.
function b64decode(s) {
  s = s.replace(/[\r\n]/g, "");
  if (s.length % 4 !== 0 || !BASE64.test(s)) return null;
  return Buffer.from(s, "base64");
}

// The prefix is optional, as in the reference libraries, so a secret pasted without it
// keeps working.
function secretKey(secret) {
  const b64 = typeof secret === "string" && secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  if (typeof b64 !== "string" || b64 === "") {
    throw new TypeError(`webhook secret is not valid: it is empty; expected "${SECRET_PREFIX}" followed by base64`);
  }
  const key = b64decode(b64);
  if (key === null) throw new TypeError(`webhook secret is not valid: the part after "${SECRET_PREFIX}" is not standard base64`);
  if (key.length === 0) throw new TypeError("webhook secret is not valid: the key is empty");
  return key;
}

function toBuffer(body) {
  if (typeof body === "string") return Buffer.from(body, "utf8");
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  if (ArrayBuffer.isView(body)) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  throw new TypeError("body must be the raw request body: a Buffer, Uint8Array, ArrayBuffer or string");
}

function firstValue(v) {
  if (Array.isArray(v)) v = v[0];
  return v == null ? "" : String(v);
}

// Reads a header whatever the case of its name, from a fetch Headers, a Map or a plain
// object such as node's req.headers.
function header(headers, name) {
  if (!headers) return "";
  if (typeof headers.get === "function") {
    const v = firstValue(headers.get(name));
    if (v) return v;
  }
  const entries = typeof headers.entries === "function" ? headers.entries() : Object.entries(headers);
  for (const [k, v] of entries) {
    if (String(k).toLowerCase() === name) return firstValue(v);
  }
  return "";
}

function mac(key, msgId, timestamp, body) {
  return createHmac("sha256", key).update(`${msgId}.${timestamp}.`).update(body).digest();
}

/** Returns the webhook-signature value for a message, e.g. to test an agent. */
export function sign(secret, msgId, timestamp, body) {
  return "v1," + mac(secretKey(secret), msgId, String(Math.trunc(timestamp)), toBuffer(body)).toString("base64");
}

/**
 * Checks a request's Standard Webhooks signature; throws SignatureError if it fails.
 * The webhook-id and webhook-timestamp headers must be present, the timestamp within
 * `tolerance` seconds of this machine's clock (the default when tolerance <= 0), and
 * one of the space-separated "v1," signatures must match the raw body. An invalid
 * secret throws TypeError.
 */
export function verify(secret, headers, body, { tolerance = DEFAULT_TOLERANCE } = {}) {
  const key = secretKey(secret);
  const id = header(headers, "webhook-id");
  const ts = header(headers, "webhook-timestamp");
  const sigs = header(headers, "webhook-signature");
  const missing = [["webhook-id", id], ["webhook-timestamp", ts], ["webhook-signature", sigs]].filter(([, v]) => !v).map(([n]) => n);
  if (missing.length > 0) {
    throw new SignatureError("missing_header", `webhook signature header missing: ${missing.join(", ")}`);
  }
  checkTimestamp(ts, tolerance);
  const want = mac(key, id, ts, toBuffer(body));
  for (const candidate of signatures(sigs)) {
    if (timingSafeEqual(candidate, want)) return;
  }
  throw new SignatureError("no_matching_signature", "no webhook signature matches");
}

function checkTimestamp(ts, tolerance) {
  if (!(tolerance > 0)) tolerance = DEFAULT_TOLERANCE;
  if (!UNIX_SECONDS.test(ts)) {
    throw new SignatureError("invalid_timestamp", `webhook timestamp is not valid: "${ts}" is not unix seconds`);
  }
  const at = Number(ts);
  const now = Date.now() / 1000;
  if (at < now - tolerance) {
    throw new SignatureError("timestamp_too_old", `webhook timestamp is too old: ${at}, more than ${tolerance}s before now`);
  }
  if (at > now + tolerance) {
    throw new SignatureError("timestamp_too_new", `webhook timestamp is too far in the future: ${at}, more than ${tolerance}s after now`);
  }
}

function signatures(value) {
  const fields = value.split(/\s+/).filter(Boolean);
  if (fields.length > MAX_SIGNATURES) {
    throw new SignatureError("malformed_signature", `webhook signature header is malformed: more than ${MAX_SIGNATURES} signatures`);
  }
  const out = [];
  for (const f of fields) {
    const comma = f.indexOf(",");
    if (comma < 0) {
      throw new SignatureError("malformed_signature", `webhook signature header is malformed: "${f.slice(0, 40)}" is not <version>,<base64>`);
    }
    // Other versions may be added by the sender; they must not break us. A malformed
    // candidate never matches; look at the others.
    if (f.slice(0, comma) !== "v1") continue;
    const b = b64decode(f.slice(comma + 1));
    if (b !== null && b.length === 32) out.push(b);
  }
  if (out.length === 0) throw new SignatureError("no_matching_signature", "no webhook signature matches");
  return out;
}

function verified(secret, headers, body, { tolerance = DEFAULT_TOLERANCE, allowUnsigned = false } = {}) {
  const raw = toBuffer(body);
  if (secret) {
    verify(secret, headers, raw, { tolerance });
  } else if (!allowUnsigned) {
    // A secret that failed to load must not switch verification off silently.
    throw new TypeError("no webhook secret configured: pass the project's whsec_... signing secret, or allowUnsigned: true for local development");
  }
  // X-Request-Id is what the receiver expects back. A call's webhook-id carries the
  // same value, so it stands in for a sender that sets only the Standard Webhooks headers.
  const requestId = header(headers, "x-request-id") || header(headers, "webhook-id");
  if (!requestId) throw new BodyError("the X-Request-Id header is missing, so the result could not be matched to the call");
  let value;
  try {
    value = JSON.parse(raw.toString("utf8"));
  } catch (err) {
    throw new BodyError(`the body is not JSON: ${err.message}`);
  }
  return { raw, requestId, value };
}

/**
 * Verifies a call of the collector and decodes it: a JSON array of records (batch mode)
 * or {"trigger": <record>, "window": [<records>]} (window mode). Throws SignatureError
 * (401) or BodyError (400); an empty secret throws TypeError unless allowUnsigned.
 */
export function parseCall(secret, headers, body, options) {
  const { raw, requestId, value } = verified(secret, headers, body, options);
  if (Array.isArray(value)) {
    return { requestId, isWindow: false, records: value, trigger: null, window: [], raw };
  }
  if (value !== null && typeof value === "object") {
    const trigger = value.trigger ?? null;
    const window = value.window ?? [];
    if (trigger === null) throw new BodyError('a window call without "trigger"');
    if (!Array.isArray(window)) throw new BodyError('"window" of a window call is not an array');
    return { requestId, isWindow: true, records: [], trigger, window, raw };
  }
  throw new BodyError("expected a JSON array of records or a window call object");
}

/** Verifies a webhook sink's delivery; returns its payload (any JSON value, parsed) and raw bytes. */
export function verifyWebhook(secret, headers, body, options) {
  const { raw, requestId, value } = verified(secret, headers, body, options);
  return { requestId, webhookId: header(headers, "webhook-id"), payload: value, raw };
}

function payloadJSON(payload) {
  if (payload instanceof ArrayBuffer || ArrayBuffer.isView(payload)) {
    const raw = toBuffer(payload).toString("utf8");
    try {
      JSON.parse(raw);
    } catch (err) {
      throw new TypeError(`the payload bytes are not valid JSON: ${err.message}`);
    }
    return raw;
  }
  const json = JSON.stringify(payload);
  if (json === undefined) throw new TypeError("the payload cannot be sent as JSON (undefined or a function)");
  return json;
}

function apiError(status, headers, text) {
  let code = "";
  let message = "";
  try {
    const err = JSON.parse(text).error;
    if (err && err.code) {
      code = String(err.code);
      message = String(err.message ?? "");
    }
  } catch {
    // not the receiver's shape (a proxy's page, say); shown below
  }
  if (!code) {
    message = text.trim();
    if (message.length > 200) message = message.slice(0, 200) + "...";
    if (!message) message = "the answer had no body";
  }
  const ra = (headers.get("retry-after") ?? "").trim();
  const retryAfter = /^[0-9]+$/.test(ra) && Number(ra) > 0 ? Number(ra) : undefined;
  return new ApiError(status, code, message, retryAfter);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Sends results to an otelcol-svc receiver with one of the project's API keys. */
export class Client {
  constructor(receiverUrl, apiKey, { maxAttempts = 4, timeoutMs = 30000, backoffMs = 250, fetch = globalThis.fetch } = {}) {
    if (!receiverUrl || !apiKey) throw new TypeError("Client needs receiverUrl and apiKey");
    this.url = String(receiverUrl).replace(/\/+$/, "") + OUTPUT_PATH;
    this.apiKey = apiKey;
    this.maxAttempts = Math.max(1, maxAttempts);
    this.timeoutMs = timeoutMs;
    this.backoffMs = backoffMs;
    this.fetch = fetch;
  }

  /**
   * Posts payload as the result of the call requestId; resolves to the receiver's answer.
   * Connection errors, 429 and 5xx are retried with backoff, honouring Retry-After; other
   * answers reject with ApiError at once; a connection error that outlasts the retries
   * rejects as it is.
   */
  async sendResult(payload, requestId) {
    if (!requestId) throw new TypeError("requestId is empty; pass the requestId of the call the result answers");
    const body = `{"request_id":${JSON.stringify(String(requestId))},"payload":${payloadJSON(payload)}}`;
    let backoff = this.backoffMs;
    for (let attempt = 1; ; attempt++) {
      let wait;
      try {
        return await this.#post(body, requestId);
      } catch (err) {
        if (err instanceof ApiError) {
          const transient = err.status === 429 || err.status >= 500;
          if (!transient || attempt >= this.maxAttempts || (err.retryAfter ?? 0) > MAX_RETRY_WAIT) throw err;
          wait = err.retryAfter === undefined ? undefined : err.retryAfter * 1000;
        } else if (attempt >= this.maxAttempts) {
          throw err;
        }
      }
      if (wait === undefined) {
        // Jitter spreads the retries of agents that failed together.
        wait = backoff / 2 + Math.random() * (backoff / 2);
        backoff *= 2;
      }
      await sleep(wait);
    }
  }

  async #post(body, requestId) {
    const resp = await this.fetch(this.url, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "X-API-Key": this.apiKey,
        "X-Request-Id": String(requestId),
        "User-Agent": `otelcol-svc-agent-js/${VERSION}`,
      },
      body,
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    const text = await resp.text();
    if (!resp.ok) throw apiError(resp.status, resp.headers, text);
    try {
      return JSON.parse(text);
    } catch {
      return {};
    }
  }
}
