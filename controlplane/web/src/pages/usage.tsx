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
          <LimitBanner used={u.events + u.pending} pending={u.pending} limit={u.unlimited ? null : u.limit} resetAt={u.reset_at} />
          <UsageMeter label={`Events in ${monthName(u.month)}`} used={u.events + u.pending} pending={u.pending} limit={u.unlimited ? null : u.limit}>
            {u.reset_at && (
              <>
                {' '}
                Resets <When at={u.reset_at} />.
              </>
            )}
          </UsageMeter>
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
              resetAt={account.reset_at} across={account.projects.length > 1} />
          ) : (
            account === null && <LimitBanner used={u.events} limit={limit} resetAt={null} />
          )}
          <UsageMeter label={`This project's events in ${monthName(u.month)}`} used={u.events} limit={limit}>
            {limit !== null && " The limit is the owner's account's."}
            {/* The account's total includes records not counted per project yet: say so, so the two add up. */}
            {account && account.pending > 0 && ` ${num.format(account.pending)} more of your account's events are still being counted.`}
          </UsageMeter>
          <DaysChart days={u.days} month={u.month} />
        </>
      )}
    </>
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

/** At 80% a warning, at 100% the limit reached: in words, not only colour. */
export function LimitBanner({ used, pending = 0, limit, resetAt, across = false }: {
  used: number;
  pending?: number;
  limit: number | null;
  resetAt: string | null;
  /** The total is over several projects (on one project's page). */
  across?: boolean;
}) {
  if (!limit) return null;
  const where = across ? ' across your projects' : '';
  const pct = Math.floor((used / limit) * 100);
  if (pct >= 100) {
    return (
      <div class="alert alert-error" role="alert">
        <strong>Limit reached:</strong> {num.format(used)} of {num.format(limit)} events this month{where}{settling(used, pending)}. New events are refused
        (429 quota_exceeded) until the limit resets{resetAt && <> on <When at={resetAt} /></>}, or the limit is raised.
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

function UsageMeter({ label, used, pending = 0, limit, children }: {
  label: string;
  used: number;
  pending?: number;
  limit: number | null;
  children?: ComponentChildren;
}) {
  return (
    <section class="panel" aria-labelledby="meter-h">
      <h2 id="meter-h">{label}</h2>
      {limit !== null ? (
        <>
          <meter class="usage-meter" aria-labelledby="meter-h" min={0} max={limit} value={Math.min(used, limit)}
            low={limit * 0.8} high={limit * 0.999} optimum={0} />
          <p>
            <strong>{num.format(used)}</strong> of {num.format(limit)} events ({Math.floor((used / limit) * 100)}%){settling(used, pending)}.
            {children}
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
