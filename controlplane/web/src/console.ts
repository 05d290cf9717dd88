// The data plane's console API, called from the browser (docs/contract.md#section-11 to #section-13): the
// control plane issues a short-lived console token for one project, and the page sends it
// to the receiver, so payloads never pass through the control plane. The token is kept in
// memory only, per project, and fetched again before it expires.
import { api, ApiError, sentence } from './api';
import { explainUnreachable } from './reach';

interface ConsoleToken {
  token: string;
  expires_at: string;
  receiver_url: string;
}

interface Held {
  token: ConsoleToken;
  expires: number;
}

/** A token with less than this left is replaced before use: a poll never races its expiry. */
const REFRESH_MARGIN_MS = 60_000;

const held = new Map<string, Held>();
const inflight = new Map<string, Promise<Held>>();

async function token(projectId: string, fresh = false): Promise<Held> {
  const h = held.get(projectId);
  if (!fresh && h && h.expires - Date.now() > REFRESH_MARGIN_MS) return h;
  let p = inflight.get(projectId);
  if (!p) {
    p = api<ConsoleToken>('POST', `/projects/${encodeURIComponent(projectId)}/console-token`).then(
      (t) => {
        const got = { token: t, expires: Date.parse(t.expires_at) || Date.now() + 2 * REFRESH_MARGIN_MS };
        held.set(projectId, got);
        return got;
      },
    );
    p.finally(() => inflight.delete(projectId)).catch(() => {});
    inflight.set(projectId, p);
  }
  return p;
}

/** Forgets every token (at log out). */
export function forgetConsoleTokens() {
  held.clear();
}

/**
 * Calls {receiver_url}/console/v1/projects/{id}{path}. A refused token (expired, or the
 * user's access changed) is replaced once; a second refusal is the answer.
 */
export async function consoleApi<T>(
  projectId: string,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
  extraHeaders?: Record<string, string>,
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    const t = await token(projectId, attempt > 0);
    const headers: Record<string, string> = { Accept: 'application/json', Authorization: `Bearer ${t.token.token}`, ...extraHeaders };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const base = t.token.receiver_url.replace(/\/+$/, '');
    let res: Response;
    try {
      res = await fetch(`${base}/console/v1/projects/${encodeURIComponent(projectId)}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: 'omit',
        cache: 'no-store',
      });
    } catch {
      // No answer at all: the receiver is down, or it does not allow this page's origin.
      const why = await explainUnreachable(base);
      throw new ApiError(0, why.code, why.message, 0);
    }
    const data = await res.json().catch(() => null);
    if (res.ok) return data as T;
    if (res.status === 401 && attempt === 0) continue;
    const e = data?.error ?? {};
    const err = new ApiError(res.status, e.code ?? 'error', sentence(e.message ?? `The receiver answered ${res.status}.`),
      Number(res.headers.get('Retry-After')) || 0);
    (err as ApiError & { details?: unknown }).details = e;
    throw err;
  }
}

/** Records (docs/contract.md#section-4) as the console lists them. */
export interface ConsoleEvent {
  seq: number;
  time: string;
  signal: string;
  source_id?: string;
  record: unknown;
}

export interface FieldStat {
  path: string;
  /** The field in OTTL from the records' own keys (receivers before it: absent). */
  ottl?: string;
  count: number;
  types: string[];
}

export interface Delivery {
  id: string;
  kind: 'agent' | 'sink';
  sink_id?: string;
  sink_kind?: string;
  request_id?: string;
  state: 'pending' | 'retrying' | 'delivered' | 'dead_lettered';
  attempts: number;
  status_code: number;
  error?: string;
  latency_ms: number;
  records: number;
  created_at: string;
  updated_at: string;
  replay_of?: string;
  unmatched?: boolean;
  /** When the next try of a delivery waiting for a retry is due. */
  next_attempt_at?: string;
}

export interface DeliveryDetail extends Delivery {
  /** request_headers: what each attempt sent, credentials as "[redacted]". */
  attempt_log: { at: string; status_code: number; error?: string; latency_ms: number; request_headers?: Record<string, string> }[];
  request_body?: unknown;
  response_body?: unknown;
  response_truncated?: boolean;
}

export interface Ledger {
  received: number;
  dropped: number;
  /** The part of dropped a cooldown or call budget held back. */
  suppressed?: number;
  agent_calls: number;
  dead_lettered: number;
  pending: number;
  calls?: number;
  calls_dead_lettered?: number;
  results: number;
  /** Results naming a request id never issued to the project. */
  unmatched?: number;
  delivered: number;
  sink_dead_lettered?: number;
  replayed?: number;
  balanced?: boolean;
  /** Incident mode: records that joined an incident (a term of the equation: their
   * incident's calls carry them), incidents opened, incident calls made, and the events
   * one incident call stood for (absent before the first). */
  incident_events?: number;
  incidents_opened?: number;
  incident_calls?: number;
  events_per_call?: number;
}

export interface DryRunRecord {
  seq: number;
  time: string;
  signal: string;
  source_id?: string;
  record: unknown;
  transformed: unknown;
}

export interface DryRun {
  mode: 'legacy' | 'window' | 'incident';
  /** Incident mode: the incidents the records would open (a count, or the incidents). */
  incidents?: number | unknown[];
  evaluated: number;
  matched: number;
  matched_seqs: number[];
  /** The matched records, oldest first: as stored, and as sent (after the transforms;
   * window mode: the call's trigger). Those beyond the answer's budget are counted in
   * records_left_out. */
  records: DryRunRecord[];
  calls: unknown[];
  errors: { seq: number; message: string }[];
  records_left_out?: number;
  calls_left_out?: number;
  errors_left_out?: number;
  truncated?: boolean;
  timed_out?: boolean;
}

/** An incident (docs/contract.md, incident mode) as the console lists it. */
export type IncidentStatus = 'open' | 'acknowledged' | 'resolved';

export interface IncidentSummary {
  id: string;
  fingerprint: string;
  title: string;
  status: IncidentStatus;
  opened_at: string;
  updated_at: string;
  resolved_at?: string;
  events: number;
  calls: number;
  acknowledged_by?: string;
  muted_until?: string;
  last_result?: string;
  counts?: { events: number; new_events: number; calls: number };
}

/** One step of an incident's story; Type says which fields it carries. */
export interface IncidentEntry {
  at: string;
  type: 'opened' | 'events' | 'call' | 'result' | 'chat' | 'acknowledged' | 'muted' | 'resolved' | 'reopened' | 'reinvestigate' | string;
  by?: string;
  detail?: string;
  request_id?: string;
  sink_id?: string;
  count?: number;
  outcome?: 'delivered' | 'dead_lettered' | 'refused' | string;
}

export interface IncidentDetail extends IncidentSummary {
  timeline: IncidentEntry[];
  timeline_dropped?: number;
}

export type IncidentAction = 'acknowledge' | 'resolve' | 'mute' | 'reinvestigate';
