// The control plane's JSON API as the page uses it: same origin, the session cookie sent
// by the browser (the page never holds a login token), the CSRF token on every write.
import type { Verification } from './sources/providers';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryAfter: number,
  ) {
    super(message);
  }
}

let csrfToken = '';
let onSessionEnded: () => void = () => {};

export function setCsrfToken(t: string) {
  csrfToken = t;
}

/** Called when a request finds the session gone (logged out elsewhere, expired). */
export function onUnauthorized(fn: () => void) {
  onSessionEnded = fn;
}

/**
 * A request body already written as JSON text, sent byte for byte: a sample payload whose
 * signature is checked must reach the control plane as typed, not re-serialized.
 */
export class RawJSON {
  constructor(readonly text: string) {}
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  let res: Response;
  try {
    res = await fetch('/api/v1' + path, {
      method,
      headers,
      body: body === undefined ? undefined : body instanceof RawJSON ? body.text : JSON.stringify(body),
      credentials: 'same-origin',
    });
  } catch {
    throw new ApiError(0, 'network', 'The control plane could not be reached. Check your connection and try again.', 0);
  }
  if (res.status === 204) return undefined as T;
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    const e = data?.error ?? {};
    const err = new ApiError(
      res.status,
      e.code ?? 'error',
      sentence(e.message ?? `The control plane answered ${res.status}.`),
      Number(res.headers.get('Retry-After')) || 0,
    );
    if (res.status === 401 && !path.startsWith('/auth/')) onSessionEnded();
    throw err;
  }
  return data as T;
}

/** The API's messages are lower-case clauses; the page shows them as sentences. */
export function sentence(s: string): string {
  const t = s.trim();
  if (!t) return t;
  const first = t[0].toUpperCase() + t.slice(1);
  return /[.!?]$/.test(first) ? first : first + '.';
}

export interface User {
  id: string;
  email: string;
}

export interface Session {
  user: User;
  csrf_token: string;
  receiver_url: string;
}

export type Role = 'owner' | 'admin' | 'member';

export interface Project {
  id: string;
  name: string;
  role: Role;
  created_at: string | null;
  updated_at: string | null;
}

export interface Key {
  id: string;
  name: string;
  prefix: string;
  scope: string;
  /** What a project key may do: ingest, results, read (keys made before scopes: all three). */
  scopes?: KeyScope[];
  created_at: string | null;
  last_used_at: string | null;
  source_id?: string;
  key?: string;
}

export type KeyScope = 'ingest' | 'results' | 'read';

export const canWrite = (r: Role) => r === 'owner' || r === 'admin';

export interface Member {
  user_id: string;
  email: string;
  role: Role;
  created_at: string | null;
}

export interface Day {
  date: string;
  events: number;
}

export interface ProjectUsage {
  month: string;
  events: number;
  limit: number | null;
  unlimited: boolean;
  days: Day[];
  /** Records refused this month (a project's own on its usage), by reason: quota, rate, too_large, limits. */
  refused: number;
  refused_by_reason: Record<string, number>;
  /** Only while the (owning) account refuses for its monthly limit: its first refusal under the limit. */
  refusing_since?: string;
}

export interface AccountUsage extends ProjectUsage {
  pending: number;
  remaining: number | null;
  reset_at: string | null;
  projects: { id: string; name: string | null; events: number; refused: number; deleted?: boolean }[];
}

/** The pipeline (docs/contract.md#section-6) and the guardrails; signing_secret for owners and admins. */
export interface Pipeline {
  trigger: string;
  transforms: string[];
  agent_endpoint_url: string;
  window_enabled: boolean;
  context_filter: string;
  window_duration_seconds: number;
  group_key: string;
  batch_size: number;
  cooldown_seconds: number;
  dedup_key: string;
  max_calls_per_minute: number;
  max_calls_per_day: number;
  window_max_bytes: number;
  window_max_events: number;
  /** legacy, window or incident; absent from control planes that predate incident mode. */
  mode?: PipelineMode;
  fingerprint?: string;
  resolve_when?: string;
  group_wait?: string;
  group_interval?: string;
  resolve_after?: string;
  reopen_within?: string;
  version?: number;
  updated_at?: string | null;
  signing_secret?: string;
  /** The pipeline's own version: bumped only when its content changes. */
  pipeline_version?: number;
  saved_by?: string | null;
  saved_at?: string | null;
  /** In save answers: what the check warns about (never a reason to refuse). */
  warnings?: PipelineProblem[];
}

/** A kept version of a pipeline; pipeline only when asked for one. */
export interface PipelineVersion {
  version: number;
  saved_by: string | null;
  saved_at: string | null;
  current: boolean;
  restored_from?: number;
  pipeline?: Pipeline;
}

export interface PipelineProblem {
  field: string;
  message: string;
  index?: number;
  position?: { line: number; column: number };
}

export interface PipelineCheck {
  valid: boolean;
  errors: PipelineProblem[];
  warnings?: PipelineProblem[];
}

export type PipelineMode = 'legacy' | 'window' | 'incident';

export interface Sink {
  id: string;
  kind: 'webhook' | 'chat' | 'slack_app';
  enabled: boolean;
  url: string;
  method?: string;
  headers?: Record<string, string>;
  format?: 'slack' | 'discord' | 'teams' | 'auto';
  text_template?: string;
  /** slack_app: the tokens are write-only ("[redacted]" once saved); the *_set flags say they are. */
  bot_token?: string;
  signing_secret?: string;
  bot_token_set?: boolean;
  signing_secret_set?: boolean;
  channel?: string;
  /** slack_app: where Slack posts button presses (in the create answer, and in lists when known). */
  interactions_url?: string;
  created_at: string | null;
  updated_at: string | null;
}

export interface SinkTestResult {
  delivered: boolean;
  status_code: number;
  error: string;
  latency_ms: number;
  response_excerpt: string;
}

export interface Source {
  id: string;
  name: string;
  connector: string;
  event_type: string;
  event_type_field: string;
  text_template: string;
  event_time_field: string;
  labels: Record<string, string> | null;
  ingest_key: string;
  ingest_url: string;
  api_key_prefix: string;
  created_at: string;
  api_key?: string;
  /** The preset that reads its payloads (docs/contract.md#section-5); absent: its own mapping. */
  preset?: string;
  /** How a sender proves itself; the secret, password or token only in the create and rotate answers. */
  verification?: Verification | null;
  secret_set?: boolean;
}

/** One event a sample would become. */
export interface SourceTestEvent {
  envelope: unknown;
  event_type: string;
  warnings: string[] | null;
}

export interface SourceTest {
  envelope: unknown;
  event_type: string;
  warnings: string[];
  /** Every event of a preset's sample (an Alertmanager notification: one per alert). */
  events?: SourceTestEvent[];
  /** Whether the headers given sign the sample, when the source verifies. */
  verification?: { ok: boolean; message?: string };
}

/** A personal access token (docs/contract.md#section-9); token only in the answer that creates it. */
export interface AccessToken {
  id: string;
  name: string;
  prefix: string;
  created_at: string | null;
  expires_at: string | null;
  last_used_at: string | null;
  /** The only projects the token opens; empty: all of yours. */
  projects?: string[];
  read_only?: boolean;
  token?: string;
}

/** An MCP client's pending sign-in, waiting for the user's Allow or Deny. */
export interface OAuthRequest {
  id: string;
  client_id: string;
  client_name: string;
  redirect_uri: string;
  redirect_host: string;
  scope: string;
  expires_at: string | null;
}

/** An MCP client the user allowed (a connected app). */
export interface OAuthGrant {
  id: string;
  client_id: string;
  client_name: string;
  created_at: string | null;
  last_used_at: string | null;
}

/** What processing stored records would send (POST .../pipeline/backlog with preview). */
export interface BacklogPreview {
  preview: true;
  records: number;
  matched: number;
  calls: number;
  first_seq: number;
  last_seq: number;
  from: string | null;
  to: string | null;
}

/** A request to process stored records, with the pipeline role's progress. */
export interface Backlog {
  id: string;
  state: 'queued' | 'running' | 'done' | 'failed';
  records: number;
  matched: number;
  calls: number;
  first_seq: number;
  last_seq: number;
  processed: number;
  requested_at: string | null;
  requested_by: string;
  updated_at: string | null;
  error?: string;
}
