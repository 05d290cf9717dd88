// Incidents (pipeline mode "incident"): the project's incidents from the receiver's console
// API, open ones first, and one incident's page with its story (events joining, the agent's
// calls and results, chat posts, people's actions) and the four actions owners and admins
// take on it. The receiver takes actions only from an owner's or admin's console token, so
// members see the buttons disabled, with why.
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, canWrite, type Member, type Pipeline, type Project } from '../api';
import {
  consoleApi,
  type IncidentAction,
  type IncidentDetail,
  type IncidentEntry,
  type IncidentStatus,
  type IncidentSummary,
} from '../console';
import { FilterSelect } from '../filters';
import { Link, navigate } from '../router';
import { Moment, formatMoment, formatRelative, useNow } from '../time';
import { ErrorMessage, Loading, PageHeader } from '../ui';

const REFRESH_MS = 4000;

export const ACT_ONLY_ADMINS = 'Only owners and admins can act on incidents';

const statusLabel: Record<IncidentStatus, { icon: string; text: string }> = {
  open: { icon: '●', text: 'Open' },
  acknowledged: { icon: '◐', text: 'Acknowledged' },
  resolved: { icon: '✓', text: 'Resolved' },
};

const muted = (i: IncidentSummary, now: Date) => !!i.muted_until && Date.parse(i.muted_until) > now.getTime();

export function IncidentStatusBadge({ incident, now }: { incident: IncidentSummary; now: Date }) {
  const s = statusLabel[incident.status] ?? { icon: '?', text: incident.status };
  return (
    <span class="istatus-wrap">
      <span class={`istatus istatus-${incident.status}`}>
        <span aria-hidden="true">{s.icon}</span> {s.text}
      </span>
      {incident.status !== 'resolved' && muted(incident, now) && (
        <span class="istatus istatus-muted" title={`Muted until ${formatMoment(incident.muted_until!, { date: true })}`}>
          Muted {formatRelative(incident.muted_until!, now).replace(/^in /, '')} more
        </span>
      )}
    </span>
  );
}

export const incidentPath = (projectId: string, id: string) =>
  `/projects/${encodeURIComponent(projectId)}/incidents/${encodeURIComponent(id)}`;

const deliveryPath = (projectId: string, requestId: string) =>
  `/projects/${encodeURIComponent(projectId)}/deliveries?delivery=${encodeURIComponent(requestId)}`;

/** Polls fn every REFRESH_MS while mounted (slower in a hidden tab); restarts when deps change. */
function usePoll(fn: () => Promise<void>, deps: unknown[]) {
  useEffect(() => {
    let stop = false;
    let timer = 0;
    const tick = async () => {
      await fn().catch(() => {});
      if (!stop) timer = window.setTimeout(tick, document.hidden ? REFRESH_MS * 5 : REFRESH_MS);
    };
    tick();
    return () => {
      stop = true;
      clearTimeout(timer);
    };
  }, deps);
}

/**
 * Who acted, in words: the receiver names a person "user:<user id or email>" (a member's
 * email is shown for their id) and a Slack user "slack:<name>". The raw name stays in
 * the title, for a search in logs.
 */
type People = Map<string, string>;

function usePeople(projectId: string): People {
  const [people, setPeople] = useState<People>(new Map());
  useEffect(() => {
    api<{ members: Member[] }>('GET', `/projects/${encodeURIComponent(projectId)}/members`).then(
      (r) => setPeople(new Map(r.members.map((m) => [m.user_id, m.email]))),
      () => {},
    );
  }, [projectId]);
  return people;
}

export function whoText(by: string, people: People): string {
  if (by.startsWith('user:')) {
    const id = by.slice(5);
    return people.get(id) ?? id;
  }
  if (by.startsWith('slack:')) return `${by.slice(6)} (Slack)`;
  return by;
}

function Who({ by, people }: { by: string; people: People }) {
  return <span class="who" title={by}>{whoText(by, people)}</span>;
}

function pipelineMode(p: Pipeline): string {
  return p.mode || (p.window_enabled ? 'window' : 'legacy');
}

export function IncidentsPage({ project }: { project: Project }) {
  const [status, setStatus] = useState('');
  const [list, setList] = useState<IncidentSummary[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [mode, setMode] = useState<string | null>(null);
  const now = useNow(5000);
  const people = usePeople(project.id);

  useEffect(() => {
    api<Pipeline>('GET', `/projects/${encodeURIComponent(project.id)}/pipeline`).then((p) => setMode(pipelineMode(p)), () => {});
  }, [project.id]);

  usePoll(async () => {
    const q = new URLSearchParams({ limit: '200' });
    if (status) q.set('status', status);
    try {
      const r = await consoleApi<{ incidents: IncidentSummary[] | null }>(project.id, 'GET', `/incidents?${q}`);
      setList(r.incidents ?? []);
      setError(null);
    } catch (err) {
      setError(err);
    }
  }, [project.id, status]);

  const count = (s: IncidentStatus) => list?.filter((i) => i.status === s).length ?? 0;
  const pipelineHref = `/projects/${encodeURIComponent(project.id)}/pipeline`;

  return (
    <>
      <PageHeader title="Incidents" project={project.name} />
      <p class="lede">
        Events with the same fingerprint make one incident. The agent is called when it opens and as it changes; it resolves on
        its own when things go quiet. Refreshed every few seconds.
      </p>
      <ErrorMessage error={error} />
      <div class="filters" role="group" aria-label="Filters">
        <FilterSelect label="Status" value={status} onChange={setStatus}>
          <option value="">All (open first)</option>
          <option value="open">Open</option>
          <option value="acknowledged">Acknowledged</option>
          <option value="resolved">Resolved</option>
        </FilterSelect>
        {list && !status && list.length > 0 && (
          <div class="istats" role="group" aria-label="Incidents by status">
            <IStat n={count('open')} label="open" tone="open" />
            <IStat n={count('acknowledged')} label="acknowledged" tone="acknowledged" />
            <IStat n={count('resolved')} label="resolved" tone="resolved" />
          </div>
        )}
        {list && (
          <span class="muted small" role="status">
            {list.length} incident{list.length === 1 ? '' : 's'}
          </span>
        )}
      </div>
      {!list && !error && <Loading what="incidents" />}
      {list && list.length === 0 && status && <p class="empty">No {status} incidents.</p>}
      {list && list.length === 0 && !status && (
        <div class="empty empty-rich">
          <p class="empty-title">No incidents yet</p>
          {mode && mode !== 'incident' ? (
            <p>
              This project's pipeline runs in <strong>{mode === 'window' ? 'window' : 'legacy'} mode</strong>, which calls the agent
              per {mode === 'window' ? 'event with its window' : 'batch of events'} and opens no incidents. In{' '}
              <strong>incident mode</strong>, matching events are grouped by a fingerprint (a service, an alert name) into incidents
              the agent investigates once, gets updates on, and that resolve on their own.
            </p>
          ) : (
            <p>
              In incident mode, the first event that matches the trigger opens an incident for its fingerprint; later ones join it.
              None has matched yet.
            </p>
          )}
          <p>
            <Link href={pipelineHref} class="btn btn-primary">
              {mode && mode !== 'incident' ? 'Set incident mode on the Pipeline page' : 'Open the Pipeline page'}
            </Link>
          </p>
        </div>
      )}
      {list && list.length > 0 && (
        <table class="incidents-table">
          <caption class="sr-only">Incidents, open ones first</caption>
          <thead>
            <tr>
              <th scope="col" class="col-status">Status</th>
              <th scope="col">Incident</th>
              <th scope="col" class="num">Events</th>
              <th scope="col" class="num">Calls</th>
              <th scope="col">First seen</th>
              <th scope="col">Last seen</th>
              <th scope="col">Acknowledged by</th>
            </tr>
          </thead>
          <tbody>
            {list.map((i) => {
              const href = incidentPath(project.id, i.id);
              return (
                <tr key={i.id} class={`irow irow-${i.status}`}
                  onClick={(e) => {
                    if ((e.target as HTMLElement).closest('a')) return;
                    navigate(href);
                  }}>
                  <td class="col-status"><IncidentStatusBadge incident={i} now={now} /></td>
                  <td class="col-incident">
                    <Link href={href} class="ititle">{i.title || i.fingerprint || i.id}</Link>
                    <span class="ifp mono" title="Fingerprint">{i.fingerprint || <span class="muted">one incident for the project</span>}</span>
                  </td>
                  <td class="num">
                    {i.events.toLocaleString()}
                    {(i.counts?.new_events ?? 0) > 0 && i.status !== 'resolved' && (
                      <span class="inew" title="Events since the agent's last call">+{i.counts!.new_events.toLocaleString()} new</span>
                    )}
                  </td>
                  <td class="num">{i.calls}</td>
                  <td class="col-time"><Ago at={i.opened_at} now={now} /></td>
                  <td class="col-time"><Ago at={i.updated_at} now={now} /></td>
                  <td class="col-ack">{i.acknowledged_by ? <Who by={i.acknowledged_by} people={people} /> : <span class="muted">—</span>}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </>
  );
}

/** A moment for a dense table: how long ago first, the time (and date when not today) under it. */
function Ago({ at, now }: { at: string; now: Date }) {
  const d = new Date(at);
  if (isNaN(d.getTime())) return <span>{at}</span>;
  // The list can be fresher than the clock between its ticks: never "in 3 s" for the past.
  const ref = d.getTime() > now.getTime() ? d : now;
  return (
    <time dateTime={d.toISOString()} title={formatMoment(d, { date: true })}>
      <span class="ago">{formatRelative(d, ref)}</span>
      <span class="muted small ago-at">{formatMoment(d, { now })}</span>
    </time>
  );
}

function IStat({ n, label, tone }: { n: number; label: string; tone: string }) {
  return (
    <span class={`istat istat-${tone}` + (n === 0 ? ' istat-zero' : '')}>
      <strong>{n}</strong> {label}
    </span>
  );
}

const actionDone: Record<IncidentAction, string> = {
  acknowledge: 'Acknowledged.',
  resolve: 'Resolved.',
  mute: 'Muted for 1 hour: no update calls until then; events still count.',
  reinvestigate: 'The agent will be called again shortly with the incident as it stands.',
};

export function IncidentPage({ project, incidentId }: { project: Project; incidentId: string }) {
  const writable = canWrite(project.role);
  const [d, setD] = useState<IncidentDetail | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState<IncidentAction | null>(null);
  const [actError, setActError] = useState<unknown>(null);
  const [note, setNote] = useState('');
  const [oldestFirst, setOldestFirst] = useState(false);
  // Every second: one incident's relative times stay right as it changes under the poll.
  const now = useNow(1000);
  const people = usePeople(project.id);
  const path = `/incidents/${encodeURIComponent(incidentId)}`;

  usePoll(async () => {
    try {
      setD(await consoleApi<IncidentDetail>(project.id, 'GET', path));
      setError(null);
    } catch (err) {
      setError(err);
    }
  }, [project.id, incidentId]);

  const act = async (a: IncidentAction) => {
    setBusy(a);
    setActError(null);
    setNote('');
    try {
      setD(await consoleApi<IncidentDetail>(project.id, 'POST', `${path}/${a}`, {}));
      setNote(actionDone[a]);
    } catch (err) {
      setActError(err);
    } finally {
      setBusy(null);
    }
  };

  const listHref = `/projects/${encodeURIComponent(project.id)}/incidents`;
  if (!d) {
    return (
      <>
        <PageHeader title="Incident" project={project.name} />
        <p class="back"><Link href={listHref}>← All incidents</Link></p>
        {error ? <ErrorMessage error={error} /> : <Loading what="the incident" />}
      </>
    );
  }

  const resolved = d.status === 'resolved';
  const isMuted = muted(d, now);
  const resolvedEntry = [...(d.timeline ?? [])].reverse().find((e) => e.type === 'resolved');
  const why = writable ? undefined : ACT_ONLY_ADMINS;
  const newEvents = d.counts?.new_events ?? 0;
  const timeline = oldestFirst ? d.timeline ?? [] : [...(d.timeline ?? [])].reverse();
  // The last event's time, from the timeline: updated_at moves with people's actions too.
  const lastEvent = [...(d.timeline ?? [])].reverse().find((e) => e.type === 'events' || e.type === 'opened' || e.type === 'reopened')?.at;

  return (
    <>
      <PageHeader title={d.title || d.fingerprint || d.id} project={project.name} />
      <p class="back"><Link href={listHref}>← All incidents</Link></p>
      <section class={`panel incident-head incident-${d.status}`} aria-label="Incident summary">
        <div class="ihead-top">
          <div class="ihead-id">
            <IncidentStatusBadge incident={d} now={now} />
            <span class="muted small">
              Fingerprint <code>{d.fingerprint || 'one incident for the project'}</code> · <span class="mono">{d.id}</span>
            </span>
          </div>
          <div class="iactions" role="group" aria-label="Incident actions">
            <ActButton label="Acknowledge" busy={busy === 'acknowledge'} onClick={() => act('acknowledge')}
              disabled={!writable || !!busy || d.status !== 'open'}
              title={why ?? (resolved ? 'The incident is resolved' : d.status === 'acknowledged' ? 'Already acknowledged' : 'Tell everyone someone is on it')} />
            <ActButton label="Resolve" busy={busy === 'resolve'} onClick={() => act('resolve')} primary
              disabled={!writable || !!busy || resolved} title={why ?? (resolved ? 'Already resolved' : 'Close the incident; the agent gets a last call')} />
            <ActButton label="Mute 1 h" busy={busy === 'mute'} onClick={() => act('mute')}
              disabled={!writable || !!busy || resolved}
              title={why ?? (resolved ? 'The incident is resolved' : 'No update calls to the agent for an hour; events still count')} />
            <ActButton label="Investigate again" busy={busy === 'reinvestigate'} onClick={() => act('reinvestigate')}
              disabled={!writable || !!busy} title={why ?? 'Call the agent again now with the incident as it stands'} />
          </div>
        </div>
        {!writable && <p class="muted small iwhy">{ACT_ONLY_ADMINS}.</p>}
        <dl class="istats-grid">
          <IFact label="Events">
            <strong>{d.events.toLocaleString()}</strong>
            {newEvents > 0 && !resolved && (
              <span class="muted small"> {newEvents.toLocaleString()} {d.calls > 0 ? 'since the last call' : 'waiting for the first call'}</span>
            )}
          </IFact>
          <IFact label="Agent calls"><strong>{d.calls}</strong></IFact>
          <IFact label="Opened"><Moment at={d.opened_at} relative now={now} /></IFact>
          <IFact label="Last event"><Moment at={lastEvent ?? d.updated_at} relative now={now} /></IFact>
          {resolved && <IFact label="Resolved"><Moment at={d.resolved_at ?? d.updated_at} relative now={now} /></IFact>}
        </dl>
        <div class="ipeople">
          {d.acknowledged_by && <p class="iperson">Acknowledged by <Who by={d.acknowledged_by} people={people} /></p>}
          {isMuted && !resolved && (
            <p class="iperson">Muted until <Moment at={d.muted_until} relative now={now} /></p>
          )}
          {resolved && resolvedEntry && <p class="iperson">{resolvedText(resolvedEntry, people)}</p>}
        </div>
        <div role="status" class="inote">{note && <span class="check-status check-ok">✓ {note}</span>}</div>
        <ErrorMessage error={actError} />
        <ErrorMessage error={error} />
      </section>

      {d.last_result && (
        <section class="panel ilast" aria-labelledby="inc-last">
          <h2 id="inc-last">The agent's latest finding</h2>
          <p class="iresult-text">{d.last_result}</p>
        </section>
      )}

      <section class="panel" aria-labelledby="inc-timeline">
        <div class="detail-head">
          <h2 id="inc-timeline">Timeline</h2>
          <button type="button" class="btn btn-small" aria-pressed={oldestFirst} onClick={() => setOldestFirst(!oldestFirst)}>
            {oldestFirst ? 'Newest first' : 'Oldest first'}
          </button>
        </div>
        {(d.timeline_dropped ?? 0) > 0 && oldestFirst && (
          <p class="muted small">{d.timeline_dropped} earlier entries are not kept: the timeline keeps the newest 200.</p>
        )}
        {timeline.length === 0 ? (
          <p class="muted">Nothing has happened yet.</p>
        ) : (
          <ol class="timeline" aria-label={oldestFirst ? 'Timeline, oldest first' : 'Timeline, newest first'}>
            {timeline.map((e, i) => (
              <TimelineItem key={`${e.at}-${i}`} e={e} project={project} title={d.title} people={people} now={now} />
            ))}
          </ol>
        )}
        {(d.timeline_dropped ?? 0) > 0 && !oldestFirst && (
          <p class="muted small">{d.timeline_dropped} earlier entries are not kept: the timeline keeps the newest 200.</p>
        )}
      </section>
    </>
  );
}

const plural = (n: number, what: string) => `${n.toLocaleString()} ${what}${n === 1 ? '' : 's'}`;

function ActButton(props: { label: string; busy: boolean; disabled: boolean; title: string; primary?: boolean; onClick: () => void }) {
  return (
    <button type="button" class={'btn' + (props.primary ? ' btn-primary' : '')} disabled={props.disabled} title={props.title}
      onClick={props.onClick}>
      {props.busy ? `${props.label}…` : props.label}
    </button>
  );
}

function IFact({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div class="ifact">
      <dt>{label}</dt>
      <dd>{children}</dd>
    </div>
  );
}

function resolvedText(e: IncidentEntry, people: People): string {
  if (e.by === 'resolve_when') return 'Resolved: an event matched the pipeline’s resolve_when';
  if (e.by === 'resolve_after') return 'Resolved: no new events for the pipeline’s resolve_after';
  return e.by ? `Resolved by ${whoText(e.by, people)}` : 'Resolved';
}

const reasonText: Record<string, string> = {
  opened: 'opening call',
  updated: 'update with new events',
  resolved: 'closing call, the incident resolved',
  reinvestigate: 'asked to investigate again',
};

const outcomeLabel: Record<string, { cls: string; text: string }> = {
  delivered: { cls: 'dstate-delivered', text: '✓ Delivered' },
  dead_lettered: { cls: 'dstate-dead_lettered', text: '✗ Dead-lettered' },
  refused: { cls: 'dstate-retrying', text: '⏸ Held back by the call limits' },
};

function TimelineItem({ e, project, title, people, now }: { e: IncidentEntry; project: Project; title: string; people: People; now: Date }) {
  let tone = 'neutral';
  let head: ComponentChildren = e.type;
  let body: ComponentChildren = e.detail ? <p class="tl-detail">{e.detail}</p> : null;
  const link = e.request_id && (
    <span class="tl-req">
      Request <span class="mono">{e.request_id}</span> ·{' '}
      <Link href={deliveryPath(project.id, e.request_id)}>View delivery</Link>
    </span>
  );
  switch (e.type) {
    case 'opened':
      tone = 'open';
      head = <>Incident opened{!!e.count && <span class="muted"> with {plural(e.count, 'event')}</span>}</>;
      if (e.detail === title) body = null;
      break;
    case 'reopened':
      tone = 'open';
      head = 'Reopened: a matching event arrived soon after it resolved';
      break;
    case 'events':
      head = `${plural(e.count ?? 0, 'event')} joined`;
      break;
    case 'call': {
      tone = e.outcome === 'dead_lettered' ? 'bad' : 'call';
      const reason = e.detail ? reasonText[e.detail] ?? e.detail : '';
      const o = e.outcome ? outcomeLabel[e.outcome] ?? { cls: '', text: e.outcome } : null;
      head = (
        <>
          Agent called{reason && <span class="muted">: {reason}</span>}
          {o && <span class={`dstate ${o.cls} tl-outcome`}>{o.text}</span>}
        </>
      );
      body = null;
      break;
    }
    case 'result':
      tone = 'result';
      head = 'Agent result';
      body = e.detail ? <blockquote class="tl-quote">{e.detail}</blockquote> : null;
      break;
    case 'chat':
      tone = 'chat';
      head = <>Posted to chat{e.by && <> by <Who by={e.by} people={people} /></>}</>;
      break;
    case 'acknowledged':
      tone = 'ack';
      head = <>Acknowledged by {e.by ? <Who by={e.by} people={people} /> : 'someone'}</>;
      break;
    case 'muted':
      tone = 'ack';
      head = <>Muted for 1 h by {e.by ? <Who by={e.by} people={people} /> : 'someone'}</>;
      break;
    case 'resolved':
      tone = 'resolved';
      head = resolvedText(e, people);
      break;
    case 'reinvestigate':
      tone = 'call';
      head = <>Investigation asked for again by {e.by ? <Who by={e.by} people={people} /> : 'someone'}</>;
      break;
  }
  return (
    <li class={`tl tl-${tone}`}>
      <span class="tl-dot" aria-hidden="true" />
      <div class="tl-main">
        <div class="tl-head">
          <span class="tl-what">{head}</span>
          <span class="tl-at"><Moment at={e.at} relative now={now} /></span>
        </div>
        {body}
        {link}
      </div>
    </li>
  );
}
