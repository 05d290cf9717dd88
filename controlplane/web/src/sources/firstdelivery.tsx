// "Did it arrive?": after a source is made, the page watches the receiver for its first
// record, so the person pasting the URL into GitHub or Alertmanager sees the sender's test
// or first delivery land without leaving the page. Read from the receiver's console API
// like Recent events (payloads never pass through the control plane).
import { useEffect, useState } from 'preact/hooks';
import { consoleApi, type ConsoleEvent } from '../console';
import { Link } from '../router';

const POLL_MS = 2000;

export function FirstDelivery({ projectId, sourceId, sender }: { projectId: string; sourceId: string; sender: string }) {
  const [got, setGot] = useState<ConsoleEvent | null>(null);
  const [unreachable, setUnreachable] = useState(false);
  useEffect(() => {
    setGot(null);
    let stop = false;
    let timer = 0;
    const poll = async () => {
      try {
        const r = await consoleApi<{ events: ConsoleEvent[] }>(projectId, 'GET',
          `/events?limit=1&source_id=${encodeURIComponent(sourceId)}`);
        if (stop) return;
        setUnreachable(false);
        if (r.events.length > 0) {
          setGot(r.events[0]);
          return;
        }
      } catch {
        if (stop) return;
        setUnreachable(true);
      }
      timer = window.setTimeout(poll, POLL_MS);
    };
    poll();
    return () => {
      stop = true;
      clearTimeout(timer);
    };
  }, [projectId, sourceId]);

  if (got) {
    const rec = (got.record ?? {}) as Record<string, unknown>;
    const type = typeof rec._event_type === 'string' ? rec._event_type : '';
    const text = typeof rec.text === 'string' ? rec.text : '';
    return (
      <p class="test-outcome test-ok first-delivery" role="status" aria-label="First delivery">
        <strong>✓ First delivery received</strong>
        {type && <> (<code>{type}</code>)</>}
        {text && <>: {text}</>}.{' '}
        <Link href={`/projects/${encodeURIComponent(projectId)}/events`}>Recent events</Link> shows everything it sends.
      </p>
    );
  }
  return (
    <p class="first-delivery muted" role="status" aria-label="First delivery">
      <span class="live-dot" aria-hidden="true" />{' '}
      {unreachable
        ? 'The receiver cannot be asked whether anything arrived; Recent events shows deliveries once it can.'
        : `Waiting for the first delivery from ${sender}… (this updates by itself)`}
    </p>
  );
}
