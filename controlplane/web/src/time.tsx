// Moments as the dashboard shows them, in one place: to the second and with the time
// zone ("14:28:07 UTC" today, "2026-11-25 14:28:07 UTC" before), how long ago (or how
// soon) beside it or on hover, and the exact instant in the <time> element for tools.
// Seven retries a few seconds apart must read as seven different times, and a time read
// off a screenshot or pasted into a chat must say which zone it is in.
import { useEffect, useState } from 'preact/hooks';

const pad = (n: number, w = 2) => String(n).padStart(w, '0');

const zoneFmt = new Intl.DateTimeFormat(undefined, { timeZoneName: 'short' });

/** The browser's short name of d's time zone ("UTC", "CET", "GMT+1"). */
export function zoneName(d: Date): string {
  return zoneFmt.formatToParts(d).find((p) => p.type === 'timeZoneName')?.value ?? '';
}

function sameDay(a: Date, b: Date): boolean {
  return a.getFullYear() === b.getFullYear() && a.getMonth() === b.getMonth() && a.getDate() === b.getDate();
}

export interface MomentOptions {
  /** Milliseconds too (Recent events, where records arrive within one second). */
  ms?: boolean;
  /** The date even when it is today (titles, where the whole moment is wanted). */
  date?: boolean;
  now?: Date;
}

/**
 * The moment in the browser's time zone: "14:28:07 UTC" when it is today,
 * "2026-11-25 14:28:07 UTC" otherwise. Dates are written year first, whatever the
 * locale, so that 03/04 never means two days.
 */
export function formatMoment(at: Date | string, opts: MomentOptions = {}): string {
  const d = typeof at === 'string' ? new Date(at) : at;
  if (isNaN(d.getTime())) return String(at);
  let time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  if (opts.ms) time += `.${pad(d.getMilliseconds(), 3)}`;
  const zone = zoneName(d);
  const day = opts.date || !sameDay(d, opts.now ?? new Date()) ? `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` : '';
  return `${day}${time}${zone ? ' ' + zone : ''}`;
}

/** How long ago, or how soon: "just now", "42 s ago", "3 min ago", "in 25 s", "2 h ago", "5 days ago". */
export function formatRelative(at: Date | string, now: Date = new Date()): string {
  const d = typeof at === 'string' ? new Date(at) : at;
  if (isNaN(d.getTime())) return '';
  const s = Math.round((d.getTime() - now.getTime()) / 1000);
  const a = Math.abs(s);
  if (a < 2) return d.getTime() > now.getTime() ? 'now' : 'just now';
  let n: string;
  if (a < 60) n = `${a} s`;
  else if (a < 3570) n = `${Math.round(a / 60)} min`;
  else if (a < 84600) n = `${Math.round(a / 3600)} h`;
  else {
    const days = Math.round(a / 86400);
    n = `${days} day${days === 1 ? '' : 's'}`;
  }
  return s < 0 ? `${n} ago` : `in ${n}`;
}

/** The current time, renewed every `every` ms: for relative times that must not go stale. */
export function useNow(every = 1000): Date {
  const [now, setNow] = useState(() => new Date());
  useEffect(() => {
    const t = window.setInterval(() => setNow(new Date()), every);
    return () => clearInterval(t);
  }, [every]);
  return now;
}

/**
 * A moment: its absolute time (seconds, zone), with how long ago beside it when
 * `relative` is set, else on hover. The title always holds the date, zone and the
 * relative time.
 */
export function Moment({ at, relative = false, ms = false, never = 'never', now }: {
  at: string | null | undefined;
  relative?: boolean;
  ms?: boolean;
  never?: string;
  now?: Date;
}) {
  if (!at) return <span class="muted">{never}</span>;
  const d = new Date(at);
  if (isNaN(d.getTime())) return <span>{at}</span>;
  const rel = formatRelative(d, now);
  return (
    <time dateTime={d.toISOString()} title={`${formatMoment(d, { date: true, ms })} (${rel})`} class="moment">
      {formatMoment(d, { ms, now })}
      {relative && <span class="muted small moment-rel"> ({rel})</span>}
    </time>
  );
}
