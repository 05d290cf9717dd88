// The count of a project's failed deliveries beside "Deliveries" in the navigation:
// dead-lettered deliveries of the last 24 hours, or since the user
// last had the Deliveries page open when that is later (remembered in localStorage, per
// project and browser). Read from the console API the Deliveries page reads.
import { useEffect, useState } from 'preact/hooks';
import { consoleApi, type Delivery } from './console';

const DAY_MS = 24 * 3600 * 1000;
/**
 * The console's since is when a delivery was created; it fails up to a retry budget later
 * (10 minutes for destinations by default). Deliveries created this much earlier are
 * asked for, and counted by when they ended.
 */
const BUDGET_MARGIN_MS = 3600 * 1000;
const POLL_MS = 15_000;
/** The console lists at most this many at once: past it the badge says "500+". */
const MAX = 500;

const seenKey = (projectId: string) => `otelcol-svc.deliveries-seen.${projectId}`;

function markSeen(projectId: string) {
  try {
    localStorage.setItem(seenKey(projectId), new Date().toISOString());
  } catch {
    // Storage refused (private mode): the badge counts the last 24 hours.
  }
}

function since(projectId: string): Date {
  let seen = 0;
  try {
    seen = Date.parse(localStorage.getItem(seenKey(projectId)) ?? '') || 0;
  } catch {
    seen = 0;
  }
  return new Date(Math.max(Date.now() - DAY_MS, seen));
}

export function failedLabel(n: number): string {
  return `${n >= MAX ? `${MAX} or more` : n} failed ${n === 1 ? 'delivery' : 'deliveries'}`;
}

/** The badge; viewing is true while the Deliveries page is open, which counts as seen. */
export function FailedDeliveriesBadge({ projectId, viewing }: { projectId: string; viewing: boolean }) {
  const [count, setCount] = useState(0);
  useEffect(() => {
    if (viewing) {
      markSeen(projectId);
      setCount(0);
      // Leaving the page: what failed while it was open was on screen.
      return () => markSeen(projectId);
    }
    let live = true;
    const poll = () => {
      const from = since(projectId);
      const q = new URLSearchParams({
        state: 'dead_lettered',
        since: new Date(from.getTime() - BUDGET_MARGIN_MS).toISOString(),
        limit: String(MAX),
      });
      consoleApi<{ deliveries: (Delivery & { replayed_by?: string })[] }>(projectId, 'GET', `/deliveries?${q}`).then(
        // A replayed delivery was dealt with: its replay is counted if it failed again.
        (r) => live && setCount(r.deliveries.filter((d) => !d.replayed_by && Date.parse(d.updated_at) >= from.getTime()).length),
        // A hint only: the pages that read the console say why it cannot be read.
        () => {},
      );
    };
    poll();
    const timer = setInterval(poll, POLL_MS);
    window.addEventListener('focus', poll);
    return () => {
      live = false;
      clearInterval(timer);
      window.removeEventListener('focus', poll);
    };
  }, [projectId, viewing]);
  if (!count) return null;
  const label = failedLabel(count);
  return (
    <span class="nav-badge" role="img" aria-label={label} title={`${label} (dead-lettered) since you last opened Deliveries, or in the last 24 hours`}>
      {count >= MAX ? `${MAX}+` : count}
    </span>
  );
}
