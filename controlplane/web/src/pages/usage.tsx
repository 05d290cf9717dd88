import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, type AccountUsage, type Day, type Project, type ProjectUsage } from '../api';
import { useLoad } from '../hooks';
import { Link } from '../router';
import { LoadStatus, PageHeader, When } from '../ui';

const num = new Intl.NumberFormat();

/** The account's month: the meter against the limit, the 80%/100% banner, per project, per day. */
export function AccountUsagePage() {
  const load = useLoad(() => api<AccountUsage>('GET', '/usage'), []);
  const u = load.data;
  return (
    <>
      <PageHeader title="Usage" />
      <p class="lede">Accepted records this month across the projects you own, against your account's monthly limit.</p>
      <LoadStatus load={load} what="usage" />
      {u && (
        <>
          <LimitBanner used={u.events + u.pending} pending={u.pending} limit={u.unlimited ? null : u.limit} resetAt={u.reset_at}
            refusingSince={u.refusing_since} />
          <UsageMeter label={`Events in ${monthName(u.month)}`} used={u.events + u.pending} pending={u.pending} limit={u.unlimited ? null : u.limit}
            refusing={!!u.refusing_since}>
            {u.reset_at && (
              <>
                {' '}
                Resets <When at={u.reset_at} />.
              </>
            )}
          </UsageMeter>
          <RefusedPanel refused={u.refused} byReason={u.refused_by_reason} />
          <DaysChart days={u.days} month={u.month} />
          <section class="panel" aria-labelledby="by-project">
            <h2 id="by-project">By project</h2>
            {u.projects.length === 0 ? (
              <p class="muted">You own no projects.</p>
            ) : (
              <table>
                <thead>
                  <tr>
                    <th scope="col">Project</th>
                    <th scope="col" class="num">
                      Events
                    </th>
                    <th scope="col" class="num">
                      Refused
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {u.projects.map((p) => (
                    <tr key={p.id}>
                      <td>
                        {p.deleted ? (
                          <span class="muted">deleted project</span>
                        ) : (
                          <Link href={`/projects/${encodeURIComponent(p.id)}/usage`}>{p.name}</Link>
                        )}
                      </td>
                      <td class="num">{num.format(p.events)}</td>
                      <td class="num">{num.format(p.refused ?? 0)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </section>
        </>
      )}
    </>
  );
}

/** One project's month; the limit is its owner's account's, shared by all their projects. */
export function ProjectUsagePage({ project }: { project: Project }) {
  const load = useLoad(() => api<ProjectUsage>('GET', `/projects/${encodeURIComponent(project.id)}/usage`), [project.id]);
  const u = load.data;
  // undefined while the owner's account total loads: no banner of another basis meanwhile.
  const [account, setAccount] = useState<AccountUsage | null | undefined>(undefined);
  useEffect(() => {
    // Only the owner's account total says how near the limit is; members see this project's share.
    if (project.role === 'owner') {
      setAccount(undefined);
      api<AccountUsage>('GET', '/usage').then(setAccount, () => setAccount(null));
    } else setAccount(null);
  }, [project.id]);
  const limit = u && !u.unlimited ? u.limit : null;
  return (
    <>
      <PageHeader title="Usage" project={project.name} />
      <p class="lede">
        Records this project accepted this month. The monthly limit belongs to the project owner's account and is
        shared by all of its projects{project.role === 'owner' && <> (see <Link href="/usage">your account's usage</Link>)</>}.
      </p>
      <LoadStatus load={load} what="usage" />
      {u && (
        <>
          {account ? (
            <LimitBanner used={account.events + account.pending} pending={account.pending} limit={account.unlimited ? null : account.limit}
              resetAt={account.reset_at} across={account.projects.length > 1} refusingSince={account.refusing_since} />
          ) : (
            account === null && <LimitBanner used={u.events} limit={limit} resetAt={resetOf(u.month)} refusingSince={u.refusing_since} member />
          )}
          <UsageMeter label={`This project's events in ${monthName(u.month)}`} used={u.events} limit={limit} refusing={!!u.refusing_since}>
            {limit !== null && " The limit is the owner's account's."}
            {/* The account's total includes records not counted per project yet: say so, so the two add up. */}
            {account && account.pending > 0 && ` ${num.format(account.pending)} more of your account's events are still being counted.`}
          </UsageMeter>
          <RefusedPanel refused={u.refused} byReason={u.refused_by_reason} project />
          <DaysChart days={u.days} month={u.month} />
        </>
      )}
    </>
  );
}

/** When the count of month ("2026-11") resets: 00:00 UTC on the 1st of the next month. */
export function resetOf(month: string): string | null {
  const [y, m] = month.split('-').map(Number);
  if (!y || !m) return null;
  return new Date(Date.UTC(y, m, 1)).toISOString();
}

/** What a user can do about the monthly limit, as this service offers it. */
export function WhatToDo({ resetAt, member = false }: { resetAt: string | null; member?: boolean }) {
  return (
    <>
      Wait until the count resets{resetAt && <> on <When at={resetAt} /></>}, or {member ? "ask the project's owner to have" : 'ask'} the
      operator of this service {member ? 'raise' : 'to raise'} {member ? "the owner's" : 'your'} account's limit (they do it with{' '}
      <code>accounts set-limit</code>; there is no self-service upgrade). Until then, send fewer events, e.g. filter them at the source.
    </>
  );
}

const reasonLabels: Record<string, string> = {
  quota: 'Monthly limit reached (429 quota_exceeded)',
  rate: 'Ingest rate limit (429 rate_limited)',
  too_large: 'Too large: body, record or request over a size limit (413 payload_too_large)',
  limits: "Other account limits, e.g. the account's share of bytes being read (503)",
};

/** The month's refused records and why: what the receivers answered 429/413/503 for. */
function RefusedPanel({ refused, byReason, project = false }: { refused: number; byReason: Record<string, number>; project?: boolean }) {
  const reasons = Object.entries(byReason ?? {}).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
  return (
    <section class="panel" aria-labelledby="refused-h">
      <h2 id="refused-h">Refused this month</h2>
      {refused > 0 ? (
        <>
          <p>
            <strong class="refused-count">{num.format(refused)}</strong> event{refused === 1 ? '' : 's'} refused {project ? 'from this project ' : ''}
            this month; nothing of a refused request was stored.
          </p>
          <table>
            <thead>
              <tr>
                <th scope="col">Reason</th>
                <th scope="col" class="num">
                  Events refused
                </th>
              </tr>
            </thead>
            <tbody>
              {reasons.map(([r, n]) => (
                <tr key={r}>
                  <td>{reasonLabels[r] ?? r}</td>
                  <td class="num">{num.format(n)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <p class="hint">
            Counted in events where the request's events were known; a request refused before its body was read (too large, or
            the receiver's limits) counts as one. Counts arrive within a few seconds.
          </p>
        </>
      ) : (
        <p class="muted">No events refused {project ? 'from this project ' : ''}this month.</p>
      )}
    </section>
  );
}

function monthName(month: string): string {
  const [y, m] = month.split('-').map(Number);
  if (!y || !m) return month;
  return new Intl.DateTimeFormat(undefined, { month: 'long', year: 'numeric', timeZone: 'UTC' }).format(new Date(Date.UTC(y, m - 1, 1)));
}

/**
 * Records just accepted are set aside against the limit before they are counted (the
 * account's "pending", settled within a moment): shown apart, so that a total that
 * includes them agrees with a meter of counted events beside it.
 */
function settling(used: number, pending: number) {
  return pending > 0 ? `: ${num.format(used - pending)} counted + ${num.format(pending)} still being counted` : '';
}

/**
 * At 80% a warning; at 100%, or while the account refuses (a batch that does not fit in
 * what is left is refused whole below 100%), since when it refuses and what to do: in
 * words, not only colour.
 */
export function LimitBanner({ used, pending = 0, limit, resetAt, across = false, refusingSince, member = false }: {
  used: number;
  pending?: number;
  limit: number | null;
  resetAt: string | null;
  /** The total is over several projects (on one project's page). */
  across?: boolean;
  /** The usage API's refusing_since: the account is refusing for its monthly limit. */
  refusingSince?: string;
  /** used is one project's, not the account's (a member's view). */
  member?: boolean;
}) {
  if (!limit) return null;
  const where = across ? ' across your projects' : '';
  const pct = Math.floor((used / limit) * 100);
  const since = refusingSince && (
    <p class="refusing-since" style={{ margin: '0 0 4px' }}>
      <strong>
        Refusing since <When at={refusingSince} />
      </strong>
    </p>
  );
  if (refusingSince && member) {
    return (
      <div class="alert alert-error" role="alert">
        {since}
        The account that owns this project has reached its monthly limit: requests that do not fit in what is left of it are refused
        (429 quota_exceeded). <WhatToDo resetAt={resetAt} member /> Only the owner sees the account's total.
      </div>
    );
  }
  if (pct >= 100) {
    return (
      <div class="alert alert-error" role="alert">
        {since}
        <strong>Limit reached:</strong> {num.format(used)} of {num.format(limit)} events this month{where}{settling(used, pending)}. New events are refused
        (429 quota_exceeded). <WhatToDo resetAt={resetAt} />
      </div>
    );
  }
  if (refusingSince) {
    const left = limit - used;
    return (
      <div class="alert alert-error" role="alert">
        {since}
        {num.format(used)} of {num.format(limit)} events this month{where} ({pct}%){settling(used, pending)}. Requests holding more than the{' '}
        {num.format(left)} event{left === 1 ? '' : 's'} left are refused whole (429 quota_exceeded); smaller ones still pass.{' '}
        <WhatToDo resetAt={resetAt} />
      </div>
    );
  }
  if (pct >= 80) {
    return (
      <div class="alert alert-warn" role="status">
        <strong>Warning:</strong> {pct}% of this month's limit used{where} ({num.format(used)} of {num.format(limit)} events{settling(used, pending)}). At
        100% new events are refused until the limit resets.
      </div>
    );
  }
  return null;
}

function UsageMeter({ label, used, pending = 0, limit, refusing = false, children }: {
  label: string;
  used: number;
  pending?: number;
  limit: number | null;
  /** The account refuses now (below 100% too): the meter shows it as over, in red. */
  refusing?: boolean;
  children?: ComponentChildren;
}) {
  const shown = limit === null ? 0 : Math.min(used, limit);
  const high = limit === null ? 0 : refusing ? Math.max(shown - 0.5, 0) : limit * 0.999;
  return (
    <section class="panel" aria-labelledby="meter-h">
      <h2 id="meter-h">{label}</h2>
      {limit !== null ? (
        <>
          <meter class="usage-meter" aria-labelledby="meter-h" min={0} max={limit} value={shown}
            low={Math.min(limit * 0.8, high)} high={high} optimum={0} />
          <p>
            <strong>{num.format(used)}</strong> of {num.format(limit)} events ({Math.floor((used / limit) * 100)}%){settling(used, pending)}.
            {children}
          </p>
          <p class="hint">
            A request is accepted or refused whole: when it holds more events than are left, all of them are refused. So a sender of
            batches (say 50 events a request) may leave the last few events of the month unused.
          </p>
        </>
      ) : (
        <p>
          <strong>{num.format(used)}</strong> events (no limit){settling(used, pending)}
        </p>
      )}
    </section>
  );
}

/** Events per day as bars, with the numbers in a table for screen readers and copying. */
function DaysChart({ days, month }: { days: Day[]; month: string }) {
  const all = monthDays(month, days);
  const max = Math.max(1, ...all.map((d) => d.events));
  const w = 720;
  const h = 140;
  const bw = w / all.length;
  const total = all.reduce((s, d) => s + d.events, 0);
  return (
    <section class="panel" aria-labelledby="days-h">
      <h2 id="days-h">Events per day</h2>
      <svg class="chart" viewBox={`0 0 ${w} ${h + 18}`} role="img"
        aria-label={`Events per day in ${monthName(month)}: ${num.format(total)} in all, at most ${num.format(max)} in a day`}>
        <line x1={0} y1={h} x2={w} y2={h} class="chart-axis" />
        {all.map((d, i) => {
          const bh = d.events ? Math.max(2, (d.events / max) * (h - 10)) : 0;
          return (
            <g key={d.date}>
              <rect x={i * bw + 2} y={h - bh} width={Math.max(1, bw - 4)} height={bh} class="chart-bar">
                <title>
                  {d.date}: {num.format(d.events)} events
                </title>
              </rect>
              {(i === 0 || (i + 1) % 5 === 0 || i === all.length - 1) && (
                <text x={i * bw + bw / 2} y={h + 14} class="chart-label" text-anchor="middle">
                  {Number(d.date.slice(8))}
                </text>
              )}
            </g>
          );
        })}
      </svg>
      <details>
        <summary>Show the numbers</summary>
        <table>
          <thead>
            <tr>
              <th scope="col">Day</th>
              <th scope="col" class="num">
                Events
              </th>
            </tr>
          </thead>
          <tbody>
            {all.filter((d) => d.events > 0).map((d) => (
              <tr key={d.date}>
                <td>{d.date}</td>
                <td class="num">{num.format(d.events)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </section>
  );
}

/** Every day of the month up to today (UTC), zero where the API has none. */
function monthDays(month: string, days: Day[]): Day[] {
  const [y, m] = month.split('-').map(Number);
  const byDate = new Map(days.map((d) => [d.date, d.events]));
  const now = new Date();
  const thisMonth = now.getUTCFullYear() === y && now.getUTCMonth() + 1 === m;
  const last = thisMonth ? now.getUTCDate() : new Date(Date.UTC(y, m, 0)).getUTCDate();
  const out: Day[] = [];
  for (let d = 1; d <= last; d++) {
    const date = `${month}-${String(d).padStart(2, '0')}`;
    out.push({ date, events: byDate.get(date) ?? 0 });
  }
  return out.length ? out : days;
}
