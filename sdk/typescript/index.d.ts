/** The raw request body: the bytes the signature covers. Strings are taken as UTF-8. */
export type Body = Uint8Array | ArrayBuffer | string;

/**
 * Request headers in any case: a fetch `Headers`, a `Map`, or a plain object such as
 * node's `req.headers`.
 */
export type HeadersLike =
  | { get(name: string): string | null | undefined }
  | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** How far webhook-timestamp may be from this machine's clock, in seconds (default 300). */
  tolerance?: number;
}

export interface ParseOptions extends VerifyOptions {
  /**
   * With an empty secret, accept requests without checking a signature: for local
   * development against a project without a signing secret. A non-empty secret is always
   * checked.
   */
  allowUnsigned?: boolean;
}

/** A JSON value as JSON.parse returns it. */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

/** A record: a flat JSON object (see the contract's records). */
export type FlatRecord = { [field: string]: JSONValue };

export interface BatchCall {
  /** Quote it in sendResult. Retries of a call carry the same id: drop duplicates by it. */
  requestId: string;
  isWindow: false;
  records: FlatRecord[];
  trigger: null;
  window: [];
  raw: Buffer;
}

export interface WindowCall {
  requestId: string;
  isWindow: true;
  records: [];
  /** The record that matched the trigger. */
  trigger: FlatRecord;
  /** The records of the trigger's group that came before it, oldest first. */
  window: FlatRecord[];
  raw: Buffer;
}

/** A verified call of the collector: batch mode or window mode. */
export type Call = BatchCall | WindowCall;

/** A verified delivery of a webhook sink: an agent's result. */
export interface Webhook {
  /** The id the agent quoted when it sent the result. */
  requestId: string;
  /** Names the delivery; the same on every attempt and redelivery: deduplicate by it. */
  webhookId: string;
  payload: JSONValue;
  raw: Buffer;
}

export const VERSION: string;
export const DEFAULT_TOLERANCE: number;
export const OUTPUT_PATH: "/internal/agent-output";

/** The request is not signed with the secret, or too long ago: answer it with 401. */
export class SignatureError extends Error {
  readonly reason:
    | "missing_header"
    | "invalid_timestamp"
    | "timestamp_too_old"
    | "timestamp_too_new"
    | "malformed_signature"
    | "no_matching_signature";
  readonly status: 401;
}

/** The body is not a call (or, for a webhook, not JSON): answer it with 400. */
export class BodyError extends Error {
  readonly status: 400;
}

/** An error answer of the receiver; `message` is the receiver's. */
export class ApiError extends Error {
  /** The HTTP status, e.g. 401. */
  readonly status: number;
  /** The contract's code, e.g. "invalid_api_key"; "" when the answer had none. */
  readonly code: string;
  /** Retry-After in seconds (429 and 503), when the receiver sent one. */
  readonly retryAfter: number | undefined;
}

/** Returns the webhook-signature value for a message (`v1,<base64>`), e.g. to test an agent. */
export function sign(secret: string, msgId: string, timestamp: number, body: Body): string;

/** Checks a request's Standard Webhooks signature. Throws SignatureError, or TypeError for an invalid secret. */
export function verify(secret: string, headers: HeadersLike, body: Body, options?: VerifyOptions): void;

/** Verifies a call of the collector and decodes it. Throws SignatureError, BodyError or TypeError. */
export function parseCall(secret: string, headers: HeadersLike, body: Body, options?: ParseOptions): Call;

/** Verifies a webhook sink's delivery and returns the payload, any JSON value. */
export function verifyWebhook(secret: string, headers: HeadersLike, body: Body, options?: ParseOptions): Webhook;

export interface ClientOptions {
  /** Tries of one sendResult (default 4). */
  maxAttempts?: number;
  /** Timeout of one attempt in milliseconds (default 30000). */
  timeoutMs?: number;
  /** Wait before the first retry when the receiver sets no Retry-After, doubling (default 250). */
  backoffMs?: number;
  /** The fetch to use (default the global one). */
  fetch?: typeof globalThis.fetch;
}

/** The receiver's answer to an accepted result. */
export interface Accepted {
  accepted: true;
  request_id: string;
}

/** Sends results to an otelcol-svc receiver with one of the project's API keys. */
export class Client {
  constructor(receiverUrl: string, apiKey: string, options?: ClientOptions);
  /**
   * Posts payload (any JSON value; bytes are sent as they are and must be JSON) as the
   * result of the call requestId. Retries connection errors, 429 and 5xx; rejects with
   * ApiError on other answers.
   */
  sendResult(payload: unknown, requestId: string): Promise<Accepted>;
}
