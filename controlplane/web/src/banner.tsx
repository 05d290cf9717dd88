// The banner every project page shows while the project's account refuses events for its
// monthly limit: a user working on the pipeline or the deliveries must learn
// that new events are being refused without opening Usage.
import { useEffect, useState } from 'preact/hooks';
import { api, type Project, type ProjectUsage } from './api';
import { resetOf } from './pages/usage';
import { Link, usePath } from './router';
import { When } from './ui';

export function RefusingBanner({ project }: { project: Project }) {
  const path = usePath();
  const [usage, setUsage] = useState<ProjectUsage | null>(null);
  // Asked again on each page of the project, so that the banner goes once the limit is
  // raised or the month resets, and comes as soon as refusing starts.
  useEffect(() => {
    let live = true;
    api<ProjectUsage>('GET', `/projects/${encodeURIComponent(project.id)}/usage`).then(
      (u) => live && setUsage(u),
      // Usage unreadable (NATS away): no banner rather than an error on every page.
      () => live && setUsage(null),
    );
    return () => {
      live = false;
    };
  }, [project.id, path]);
  const usageHref = `/projects/${encodeURIComponent(project.id)}/usage`;
  // The Usage page says all of it itself.
  if (!usage?.refusing_since || path === usageHref) return null;
  const reset = resetOf(usage.month);
  return (
    <div class="alert alert-error" role="alert" aria-label="Events refused">
      <strong>
        Events are being refused since <When at={usage.refusing_since} />.
      </strong>{' '}
      This project's account has reached its monthly limit: requests that do not fit in what is left of it are answered 429
      quota_exceeded and not stored{reset && <>, until the count resets on <When at={reset} /></>}. <Link href={usageHref}>See Usage</Link> for the counts and what
      to do.
    </div>
  );
}
