// Deliveries: the project's agent calls and destination deliveries from the receiver's
// delivery log (docs/contract.md#section-11), the ledger's counts, a chart of calls and failures,
// one delivery's attempts and bodies, and replay (owners and admins: the receiver takes
// replays only from their console tokens, so members are not offered the buttons).
import { Fragment } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, canWrite, type Project, type Sink } from '../api';
import { CallsChart } from '../chart';
import { consoleApi, type Delivery, type DeliveryDetail, type Ledger } from '../console';
import { FilterSelect } from '../filters';
import { JsonBlock } from '../json';
import { Moment, useNow } from '../time';
import { ConfirmDialog, ErrorMessage, Loading, Notice, PageHeader } from '../ui';

const REFRESH_MS = 3000;

const stateLabel: Record<Delivery['state'], { icon: string; text: string }> = {
  pending: { icon: '◷', text: 'Pending' },
  retrying: { icon: '↻', text: 'Retrying' },
  delivered: { icon: '✓', text: 'Delivered' },
  dead_lettered: { icon: '✗', text: 'Dead-lettered' },
};

export function StateBadge({ state }: { state: Delivery['state'] }) {
  const s = stateLabel[state] ?? { icon: '?', text: state };
  return (
    <span class={`dstate dstate-${state}`}>
      <span aria-hidden="true">{s.icon}</span> {s.text}
    </span>
  );
}

interface ReplayAnswer {
  replayed: number;
  skipped: { id: string; reason: string }[];
}

function replayKey(): string {
  return crypto.randomUUID();
}

/** The delivery the address names (?delivery=<id>): links in chat messages and failure notices open it. */
function deliveryInAddress(): string | null {
  return new URLSearchParams(location.search).get('delivery') || null;
}

/** Keeps ?delivery= in the address in step with the open delivery, so the address can be shared. */
function showInAddress(id: string | null) {
  const q = new URLSearchParams(location.search);
  if (id) q.set('delivery', id);
  else q.delete('delivery');
  const search = q.toString();
  history.replaceState(history.state, '', location.pathname + (search ? `?${search}` : '') + location.hash);
}

export function DeliveriesPage({ project }: { project: Project }) {
  const writable = canWrite(project.role);
  const [state, setState] = useState('');
  const [kind, setKind] = useState('');
  const [list, setList] = useState<Delivery[] | null>(null);
  const [ledger, setLedger] = useState<Ledger | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [sinks, setSinks] = useState<Sink[]>([]);
  const [openId, setOpenIdState] = useState<string | null>(deliveryInAddress);
  const setOpenId = (id: string | null) => {
    setOpenIdState(id);
    showInAddress(id);
  };
  const [tick, setTick] = useState(0);
  const [confirmAll, setConfirmAll] = useState(false);
  const [replaying, setReplaying] = useState(false);
  const [replayError, setReplayError] = useState<unknown>(null);
  const [replayNote, setReplayNote] = useState('');

  // A delivery to a destination added since the page opened: the destinations are read
  // again, so its row names it (once per such change, not on every refresh).
  const unknownSink = !!list?.some((d) => d.kind === 'sink' && d.sink_id && !sinks.some((x) => x.id === d.sink_id));
  useEffect(() => {
    api<{ sinks: Sink[] }>('GET', `/projects/${encodeURIComponent(project.id)}/sinks`).then((r) => setSinks(r.sinks), () => {});
  }, [project.id, unknownSink]);

  useEffect(() => {
    let stop = false;
    let timer = 0;
    const q = new URLSearchParams({ limit: '500' });
    if (state) q.set('state', state);
    if (kind) q.set('kind', kind);
    const load = async () => {
      try {
        const [d, l] = await Promise.all([
          consoleApi<{ deliveries: Delivery[] }>(project.id, 'GET', `/deliveries?${q}`),
          consoleApi<Ledger>(project.id, 'GET', '/ledger'),
        ]);
        if (stop) return;
        setList(d.deliveries);
        setLedger(l);
        setError(null);
      } catch (err) {
        if (!stop) setError(err);
      }
      if (!stop && !document.hidden) timer = window.setTimeout(load, REFRESH_MS);
      else if (!stop) timer = window.setTimeout(load, REFRESH_MS * 5);
    };
    load();
    return () => {
      stop = true;
      clearTimeout(timer);
    };
  }, [project.id, state, kind, tick]);

  const replay = async (body: unknown): Promise<ReplayAnswer | null> => {
    setReplaying(true);
    setReplayError(null);
    setReplayNote('');
    try {
      const r = await consoleApi<ReplayAnswer>(project.id, 'POST', '/deliveries/replay', body, { 'Idempotency-Key': replayKey() });
      const skipped = r.skipped.length ? ` ${r.skipped.length} skipped: ${r.skipped.map((s) => s.reason).join('; ')}.` : '';
      setReplayNote(`Replayed ${r.replayed} deliver${r.replayed === 1 ? 'y' : 'ies'}: each is sent again as a new delivery.${skipped}`);
      setTick((t) => t + 1);
      return r;
    } catch (err) {
      setReplayError(err);
      return null;
    } finally {
      setReplaying(false);
    }
  };

  const dest = (d: Delivery) => {
    if (d.kind === 'agent') return 'Agent';
    const s = sinks.find((x) => x.id === d.sink_id);
    if (s?.kind === 'slack_app') return `Slack app ${s.channel ?? ''}`.trim();
    return s ? `${s.kind === 'chat' ? 'Chat' : 'Webhook'} ${s.url.replace(/^https?:\/\//, '').slice(0, 40)}` : d.sink_id ? `Destination ${d.sink_id}` : 'Destination';
  };
  const dead = list?.filter((d) => d.state === 'dead_lettered').length ?? 0;
  // Which listed deliveries were sent again, and as what (a replay names its original).
  const replays = new Map<string, string>();
  for (const d of list ?? []) if (d.replay_of && !replays.has(d.replay_of)) replays.set(d.replay_of, d.id);
  // "Replay all" sends again the dead letters not replayed yet. The receiver's
  // {"state": "dead_lettered"} form would also resend those already replayed (the agent
  // would get the call twice), so it names them, unless the list may not hold them all.
  const complete = !!list && list.length < 500 && !state;
  const toReplay = (list ?? []).filter((d) => d.state === 'dead_lettered' && !replays.has(d.id));
  const nothingDead = complete ? toReplay.length === 0 : !!ledger && ledger.dead_lettered + (ledger.sink_dead_lettered ?? 0) === 0;

  return (
    <>
      <PageHeader title="Deliveries" project={project.name}>
        {writable && (
          <button type="button" class="btn btn-danger" disabled={replaying || nothingDead} onClick={() => setConfirmAll(true)}
            title={nothingDead ? 'No dead letter waits for a replay' : undefined}>
            Replay all dead letters
          </button>
        )}
      </PageHeader>
      <p class="lede">Every call to the agent and every result sent to a destination, kept 7 days. Refreshed every few seconds.</p>
      <ErrorMessage error={error} />
      <ErrorMessage error={replayError} />
      {replayNote && <Notice>{replayNote}</Notice>}
      {ledger && <LedgerPanel ledger={ledger} />}
      {list && list.length > 0 && (
        <section class="panel" aria-labelledby="dl-chart">
          <h2 id="dl-chart">Calls and failures</h2>
          <CallsChart deliveries={list} />
        </section>
      )}
      {openId && (
        <DeliveryPanel project={project} id={openId} dest={dest} replayedAs={replays.get(openId)} onOpen={setOpenId} writable={writable} replaying={replaying} tick={tick}
          onReplay={(id) => replay({ ids: [id] })} onClose={() => setOpenId(null)} />
      )}
      <div class="filters" role="group" aria-label="Filters">
        <FilterSelect label="State" value={state} onChange={setState}>
          <option value="">All states</option>
          <option value="pending">Pending</option>
          <option value="retrying">Retrying</option>
          <option value="delivered">Delivered</option>
          <option value="dead_lettered">Dead-lettered</option>
        </FilterSelect>
        <FilterSelect label="Kind" value={kind} onChange={setKind}>
          <option value="">Agent calls and destinations</option>
          <option value="agent">Agent calls</option>
          <option value="sink">Destinations</option>
        </FilterSelect>
        {list && <span class="muted small" role="status">{list.length} deliver{list.length === 1 ? 'y' : 'ies'}{dead ? `, ${dead} dead-lettered` : ''}</span>}
      </div>
      {!list && !error && <Loading what="deliveries" />}
      {list && list.length === 0 && (
        <p class="empty">No deliveries{state || kind ? ' match these filters' : ' yet: they appear once the pipeline calls the agent'}.</p>
      )}
      {list && list.length > 0 && (
        <table class="deliveries-table">
          <caption class="sr-only">Deliveries, newest first</caption>
          <thead>
            <tr>
              <th scope="col" class="col-state">State</th>
              <th scope="col" class="col-to">To</th>
              <th scope="col" class="num col-attempts">Attempts</th>
              <th scope="col" class="num col-result">Status</th>
              <th scope="col" class="num col-records">Records</th>
              <th scope="col" class="col-created">Created</th>
              <th scope="col" class="col-actions"><span class="sr-only">Actions</span></th>
            </tr>
          </thead>
          <tbody>
            {list.map((d) => (
              <tr key={d.id} class={openId === d.id ? 'is-open' : undefined}>
                <td class="col-state">
                  <StateBadge state={d.state} />
                  {(d.replay_of || replays.has(d.id)) && (
                    <span class="badges">
                      {d.replay_of && <span class="badge badge-quiet">replay</span>}
                      {replays.has(d.id) && <span class="badge badge-quiet">replayed</span>}
                    </span>
                  )}
                  {d.state === 'retrying' && d.next_attempt_at && (
                    <span class="muted small next-retry">next <Moment at={d.next_attempt_at} /></span>
                  )}
                </td>
                <td class="clip col-to" title={dest(d)}>{dest(d)}</td>
                <td class="num col-attempts">{d.attempts}</td>
                <td class="num col-result">
                  {d.status_code || <span class="muted">—</span>}
                  <span class="muted small latency">{d.latency_ms} ms</span>
                </td>
                <td class="num col-records">{d.records}</td>
                <td class="col-created"><Moment at={d.created_at} /></td>
                <td class="row-actions col-actions">
                  <button type="button" class="btn btn-small" aria-label={`Details of delivery ${d.id}`} aria-expanded={openId === d.id}
                    onClick={() => setOpenId(openId === d.id ? null : d.id)}>
                    Details
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <ConfirmDialog open={confirmAll} title="Replay all dead letters?" confirmLabel="Replay all" busy={replaying} error={replayError}
        onCancel={() => setConfirmAll(false)}
        onConfirm={async () => {
          const body = complete ? { ids: toReplay.map((d) => d.id) } : { state: 'dead_lettered', ...(kind ? { kind } : {}) };
          if (await replay(body)) setConfirmAll(false);
        }}>
        <p>
          {complete ? `${toReplay.length} dead-lettered deliver${toReplay.length === 1 ? 'y' : 'ies'} not replayed yet ${toReplay.length === 1 ? 'is' : 'are'}` : 'Every dead-lettered delivery is'}{' '}
          sent again, each as a new delivery naming the old one. Fix what made them fail first (the agent's URL, a destination).
        </p>
      </ConfirmDialog>
    </>
  );
}

function LedgerPanel({ ledger: l }: { ledger: Ledger }) {
  const items: [string, number, string][] = [
    ['Received', l.received, 'records stored'],
    ['Dropped', l.dropped, 'not selected by the trigger or held back'],
    ['Sent to the agent', l.agent_calls, 'records the agent took'],
    ['Dead-lettered', l.dead_lettered, 'records of failed calls'],
    ['Pending', l.pending, 'not settled yet'],
  ];
  // Not terms of the equation, but what an owner must be told: calls the guardrails
  // prevented (part of dropped) and results the service never asked for.
  const notes: [string, number, string][] = [
    ['Held back', l.suppressed ?? 0, 'of the dropped: held back by cooldown or call limits'],
    ['Unmatched results', l.unmatched ?? 0, 'posted under a request id this project never issued'],
  ];
  // Incident mode: the events incidents took, how many incidents they made, and how many
  // events one call stood for (the grouping the mode buys). Shown once there is any.
  const inc = l.incident_events ?? 0;
  const incident: [string, string, string][] = [];
  if (inc > 0 || (l.incidents_opened ?? 0) > 0) {
    incident.push(['In incidents', inc.toLocaleString(), 'records that joined an incident']);
    incident.push(['Incidents opened', (l.incidents_opened ?? 0).toLocaleString(), 'by fingerprint']);
    incident.push(['Events per call', l.events_per_call === undefined ? '—' : l.events_per_call.toLocaleString(undefined, { maximumFractionDigits: 2 }),
      `${(l.incident_calls ?? 0).toLocaleString()} incident call${l.incident_calls === 1 ? '' : 's'} so far`]);
  }
  return (
    <section class="panel" aria-labelledby="dl-ledger">
      <div class="detail-head">
        <h2 id="dl-ledger">Ledger</h2>
        {l.balanced !== undefined && (
          <span class={'check-status ' + (l.balanced ? 'check-ok' : 'check-bad')}>
            {l.balanced ? '✓ Balanced' : '✗ Not balanced yet'}
          </span>
        )}
      </div>
      <dl class="stats">
        {items.map(([k, v, hint]) => (
          <div key={k} class="stat">
            <dt>{k}</dt>
            <dd><strong>{v.toLocaleString()}</strong> <span class="muted small">{hint}</span></dd>
          </div>
        ))}
      </dl>
      <dl class="stats">
        {notes.map(([k, v, hint]) => (
          <div key={k} class={'stat' + (v > 0 ? ' stat-notice' : '')}>
            <dt>{k}</dt>
            <dd><strong>{v.toLocaleString()}</strong> <span class="muted small">{hint}</span></dd>
          </div>
        ))}
      </dl>
      {incident.length > 0 && (
        <section aria-label="Incident counts">
          <dl class="stats">
            {incident.map(([k, v, hint]) => (
              <div key={k} class="stat stat-incident">
                <dt>{k}</dt>
                <dd><strong>{v}</strong> <span class="muted small">{hint}</span></dd>
              </div>
            ))}
          </dl>
        </section>
      )}
      <p class="hint">
        {inc > 0 ? (
          <>received = dropped + sent + dead-lettered + pending + in incidents: {l.received} = {l.dropped} + {l.agent_calls} + {l.dead_lettered} + {l.pending} + {inc}.</>
        ) : (
          <>received = dropped + sent + dead-lettered + pending: {l.received} = {l.dropped} + {l.agent_calls} + {l.dead_lettered} + {l.pending}.</>
        )}
        {' '}Messages for destinations (the agent's results, incident and usage notices): {l.results}; delivered to destinations: {l.delivered}.
      </p>
    </section>
  );
}

function DeliveryPanel(props: {
  project: Project;
  id: string;
  dest: (d: Delivery) => string;
  writable: boolean;
  replaying: boolean;
  tick: number;
  onReplay: (id: string) => void;
  onClose: () => void;
  replayedAs?: string;
  onOpen: (id: string) => void;
}) {
  const [d, setD] = useState<DeliveryDetail | null>(null);
  const [error, setError] = useState<unknown>(null);
  const ref = useRef<HTMLElement>(null);
  // Opened from a row further down: the panel is brought into view, and focus with it.
  useEffect(() => {
    ref.current?.scrollIntoView({ block: 'nearest' });
    ref.current?.focus({ preventScroll: true });
  }, [props.id]);
  useEffect(() => {
    setError(null);
    consoleApi<DeliveryDetail>(props.project.id, 'GET', `/deliveries/${encodeURIComponent(props.id)}`).then(setD, setError);
  }, [props.id, props.tick]);
  const settled = d && (d.state === 'dead_lettered' || d.state === 'delivered');
  // The relative times (created 3 min ago, next retry in 25 s) count on their own.
  const now = useNow(1000);
  return (
    <section ref={ref} tabIndex={-1} class="panel delivery-detail" aria-label={`Delivery ${props.id}`}>
      <div class="detail-head">
        <h2>Delivery <span class="mono">{props.id}</span></h2>
        <div class="card-actions">
          {props.writable && settled && (
            <button type="button" class="btn btn-primary" disabled={props.replaying} onClick={() => props.onReplay(props.id)}>
              Replay this delivery
            </button>
          )}
          <button type="button" class="btn btn-small" onClick={props.onClose}>Close</button>
        </div>
      </div>
      <ErrorMessage error={error} />
      {!d && !error && <Loading what="the delivery" />}
      {d && d.id === props.id && (
        <>
          <dl class="meta">
            <dt>State</dt><dd><StateBadge state={d.state} /></dd>
            <dt>To</dt><dd>{props.dest(d)}</dd>
            {d.request_id && (<><dt>Request id</dt><dd class="mono">{d.request_id}</dd></>)}
            {d.replay_of && (<><dt>Replay of</dt><dd><button type="button" class="link-btn mono" onClick={() => props.onOpen(d.replay_of!)}>{d.replay_of}</button></dd></>)}
            {props.replayedAs && (<><dt>Replayed as</dt><dd><button type="button" class="link-btn mono" onClick={() => props.onOpen(props.replayedAs!)}>{props.replayedAs}</button></dd></>)}
            <dt>Records</dt><dd>{d.records}</dd>
            <dt>Created</dt><dd><Moment at={d.created_at} relative now={now} /></dd>
            {d.state === 'retrying' && d.next_attempt_at && (
              <><dt>Next retry at</dt><dd><Moment at={d.next_attempt_at} relative now={now} /></dd></>
            )}
            {d.error && (<><dt>Error</dt><dd>{d.error}</dd></>)}
          </dl>
          <h3>Attempts</h3>
          {d.attempt_log.length === 0 ? <p class="muted">No attempt yet.</p> : (
            <table class="attempts-table">
              <caption class="sr-only">Attempt log</caption>
              <thead><tr><th scope="col" class="num">#</th><th scope="col">At</th><th scope="col" class="num">Status</th><th scope="col" class="num">Latency</th><th scope="col">Error</th></tr></thead>
              <tbody>
                {d.attempt_log.map((a, i) => (
                  <Fragment key={i}>
                    <tr>
                      <td class="num">{i + 1}</td>
                      <td><Moment at={a.at} now={now} /></td>
                      <td class="num">{a.status_code || <span class="muted">—</span>}</td>
                      <td class="num">{a.latency_ms} ms</td>
                      <td class="attempt-error">{a.error || <span class="muted">none</span>}</td>
                    </tr>
                    {a.request_headers && Object.keys(a.request_headers).length > 0 && (
                      <tr class="attempt-headers">
                        <td />
                        <td colSpan={4}>
                          <details>
                            <summary>Request headers of attempt {i + 1}</summary>
                            <dl class="meta headers-list" aria-label={`Request headers of attempt ${i + 1}`}>
                              {Object.entries(a.request_headers).map(([k, v]) => (
                                <Fragment key={k}><dt class="mono">{k}</dt><dd class={'mono' + (v === '[redacted]' ? ' muted' : '')}>{v}</dd></Fragment>
                              ))}
                            </dl>
                          </details>
                        </td>
                      </tr>
                    )}
                  </Fragment>
                ))}
              </tbody>
            </table>
          )}
          {d.attempt_log.some((a) => a.request_headers) && (
            <p class="hint">Credentials (Authorization, API keys, cookies, the signature) and every header a destination's settings add are never kept: they show as [redacted].</p>
          )}
          <div class="two-col bodies">
            {d.request_body !== undefined ? <JsonBlock value={d.request_body} label="Request body" maxHeight={300} /> : <p class="muted">The request body was not kept.</p>}
            {d.response_body !== undefined ? (
              <JsonBlock value={d.response_body} label={d.response_truncated ? 'Response body (first 4 KiB)' : 'Response body'} maxHeight={300} />
            ) : <p class="muted">No response body.</p>}
          </div>
        </>
      )}
    </section>
  );
}
