// Process stored records: a project's pipeline sends new records as they
// arrive; records stored earlier reach the agent only when someone asks here, after a
// preview that says how many records and calls it will be. Counts only: the page never
// sees a record.
import { useEffect, useId, useState } from 'preact/hooks';
import { api, ApiError, canWrite, type Backlog, type BacklogPreview, type Pipeline, type Project } from '../api';
import { useAction, useLoad } from '../hooks';
import { Link } from '../router';
import { ConfirmDialog, ErrorMessage, Notice, PageHeader, When } from '../ui';

/** How often the progress of a queued or running backlog is read. */
const POLL_MS = 1000;
const MAX_LAST = 10000;

type Mode = 'last' | 'since';

const n = (x: number) => x.toLocaleString();
const plural = (x: number, one: string, many = one + 's') => `${n(x)} ${x === 1 ? one : many}`;

/** A datetime-local value for a time one hour ago, in the browser's zone. */
function hourAgo(): string {
  const d = new Date(Date.now() - 3600_000);
  d.setSeconds(0, 0);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

export function BacklogPage({ project }: { project: Project }) {
  const base = `/projects/${encodeURIComponent(project.id)}/pipeline`;
  const writable = canWrite(project.role);
  const pipeline = useLoad(() => api<Pipeline>('GET', base), [project.id]);
  const latest = useLoad(() => api<{ backlog: Backlog | null }>('GET', base + '/backlog'), [project.id]);
  const [mode, setMode] = useState<Mode>('last');
  const [last, setLast] = useState('100');
  const [since, setSince] = useState(hourAgo);
  const [preview, setPreview] = useState<{ body: Record<string, unknown>; answer: BacklogPreview } | null>(null);
  const [confirming, setConfirming] = useState(false);
  const previewing = useAction();
  const starting = useAction();
  const ids = { last: useId(), since: useId() };

  const running = latest.data?.backlog && (latest.data.backlog.state === 'queued' || latest.data.backlog.state === 'running');
  useEffect(() => {
    if (!running) return;
    const t = setInterval(() => latest.reload(), POLL_MS);
    return () => clearInterval(t);
  }, [running]);

  const body = (): Record<string, unknown> | string => {
    if (mode === 'last') {
      const v = Number(last);
      if (!Number.isInteger(v) || v < 1 || v > MAX_LAST) return `Give a number of records from 1 to ${n(MAX_LAST)}.`;
      return { last: v };
    }
    const t = new Date(since);
    if (!since || Number.isNaN(t.getTime())) return 'Give the date and time to start from.';
    if (t.getTime() > Date.now()) return 'Give a time in the past.';
    return { since: t.toISOString() };
  };
  const invalid = typeof body() === 'string' ? (body() as string) : '';

  const runPreview = (e: Event) => {
    e.preventDefault();
    const b = body();
    if (typeof b === 'string') return;
    setPreview(null);
    previewing.run(async () => {
      const answer = await api<BacklogPreview>('POST', base + '/backlog', { ...b, preview: true });
      setPreview({ body: b, answer });
    });
  };
  const start = () =>
    starting.run(async () => {
      if (!preview) return;
      try {
        await api<{ backlog: Backlog }>('POST', base + '/backlog', { ...preview.body, expect_calls: preview.answer.calls });
      } catch (err) {
        // The range moved (new records, a pipeline change): show the new count to agree to.
        if (err instanceof ApiError && err.code === 'preview_changed') {
          setPreview({ body: preview.body, answer: await api<BacklogPreview>('POST', base + '/backlog', { ...preview.body, preview: true }) });
        }
        throw err;
      }
      setConfirming(false);
      setPreview(null);
      await latest.reload();
    });

  const previewButton = (
    <button type="submit" class="btn bl-preview-btn" disabled={previewing.busy || !!invalid}>
      {previewing.busy ? 'Counting…' : 'Preview'}
    </button>
  );
  const agentURL = pipeline.data?.agent_endpoint_url ?? '';
  const p = preview?.answer;
  return (
    <>
      <PageHeader title="Process stored records" project={project.name}>
        <Link href={`/projects/${encodeURIComponent(project.id)}/pipeline`} class="small">
          ← Pipeline
        </Link>
      </PageHeader>
      <p class="lede">
        The pipeline sends new events as they arrive. Events stored before the agent was set (or while it was
        removed) are not sent unless you ask here: they go through the saved pipeline (trigger, transforms, batches) to
        the agent, once. Every call is a run of your agent: preview first.
      </p>

      {latest.data?.backlog && <Progress backlog={latest.data.backlog} />}
      <ErrorMessage error={latest.error} />

      <section class="panel" aria-labelledby="bl-which">
        <h2 id="bl-which">Which stored events</h2>
        <form onSubmit={runPreview} aria-label="Stored events to process">
          <fieldset class="radio-row" aria-labelledby="bl-which">
            <label class="radio">
              <input type="radio" name="bl-mode" checked={mode === 'last'} onChange={() => (setMode('last'), setPreview(null))} />
              <span><strong>The last events</strong> <span class="muted">the most recent ones stored</span></span>
            </label>
            <label class="radio">
              <input type="radio" name="bl-mode" checked={mode === 'since'} onChange={() => (setMode('since'), setPreview(null))} />
              <span><strong>Since a time</strong> <span class="muted">every event stored from then on</span></span>
            </label>
          </fieldset>
          {mode === 'last' ? (
            <div class="field bl-range">
              <label for={ids.last}>Number of events</label>
              <div class="with-unit">
                <input id={ids.last} type="number" inputMode="numeric" min={1} max={MAX_LAST} value={last} class="bl-number"
                  aria-describedby={`${ids.last}-hint`} onInput={(e) => (setLast(e.currentTarget.value), setPreview(null))} />
                <span id={`${ids.last}-hint`} class="muted small">events, the newest stored (1 to {n(MAX_LAST)})</span>
                {previewButton}
              </div>
            </div>
          ) : (
            <div class="field bl-range">
              <label for={ids.since}>Stored since</label>
              <div class="with-unit">
                <input id={ids.since} type="datetime-local" value={since} max={new Date().toISOString().slice(0, 16)}
                  aria-describedby={`${ids.since}-hint`} onInput={(e) => (setSince(e.currentTarget.value), setPreview(null))} />
                <span id={`${ids.since}-hint`} class="muted small">your local time ({Intl.DateTimeFormat().resolvedOptions().timeZone})</span>
                {previewButton}
              </div>
            </div>
          )}
          {invalid && <p class="hint check-bad">{invalid}</p>}
        </form>
        <ErrorMessage error={previewing.error} />

        {p && (
          <div class="bl-preview" role="status" aria-label="Preview">
            <p>
              <strong>{plural(p.records, 'event')}</strong>, {n(p.matched)} match the trigger,{' '}
              <strong>{plural(p.calls, 'call')}</strong> to your agent.
            </p>
            <dl class="stats">
              <div class="stat"><dt>Stored events</dt><dd><strong>{n(p.records)}</strong></dd></div>
              <div class="stat"><dt>Match the trigger</dt><dd><strong>{n(p.matched)}</strong></dd></div>
              <div class="stat"><dt>Calls to the agent</dt><dd><strong>{n(p.calls)}</strong></dd></div>
            </dl>
            {p.records > 0 && (
              <p class="muted small">
                Stored from <When at={p.from} /> to <When at={p.to} />.
              </p>
            )}
            {p.records === 0 && <p class="muted">No event is stored in that range.</p>}
            {p.records > 0 && p.calls === 0 && <p class="muted">None of them match the trigger: there is nothing to send.</p>}
            {p.calls > 0 && !writable && (
              <Notice>Only the project's owner and admins can send stored events to the agent.</Notice>
            )}
            {p.calls > 0 && writable && !agentURL && pipeline.data && (
              <Notice>
                The project has no agent endpoint URL. Set one on the{' '}
                <Link href={`/projects/${encodeURIComponent(project.id)}/pipeline`}>Pipeline</Link> page first.
              </Notice>
            )}
            {p.calls > 0 && writable && agentURL && (
              <div class="save-bar">
                <button type="button" class="btn btn-primary" disabled={!!running}
                  onClick={() => (starting.setError(null), setConfirming(true))}>
                  Send {plural(p.calls, 'call')} to the agent
                </button>
                {running && <span class="muted small">Wait until the run in progress is done.</span>}
              </div>
            )}
          </div>
        )}
      </section>

      <ConfirmDialog open={confirming} title={p ? `Send ${plural(p.calls, 'call')} to the agent?` : ''}
        confirmLabel={p ? `Send ${plural(p.calls, 'call')}` : 'Send'} busy={starting.busy} error={starting.error}
        onConfirm={start} onCancel={() => setConfirming(false)}>
        {p && (
          <p>
            {plural(p.records, 'stored event')} ({n(p.matched)} matching the trigger) go to <code>{agentURL}</code> in{' '}
            {plural(p.calls, 'call')}. Each call is a run of your agent. This cannot be undone.
          </p>
        )}
      </ConfirmDialog>
    </>
  );
}

const stateText: Record<Backlog['state'], { icon: string; text: string }> = {
  queued: { icon: '◷', text: 'Queued' },
  running: { icon: '↻', text: 'Sending' },
  done: { icon: '✓', text: 'Done' },
  failed: { icon: '✗', text: 'Failed' },
};

function Progress({ backlog: b }: { backlog: Backlog }) {
  const s = stateText[b.state] ?? { icon: '?', text: b.state };
  const labelId = useId();
  return (
    <section class="panel" aria-labelledby={labelId}>
      <h2 id={labelId}>Latest run</h2>
      <p role="status" aria-live="polite">
        <span class={`dstate bl-state-${b.state}`}>
          <span aria-hidden="true">{s.icon}</span> {s.text}
        </span>{' '}
        {n(b.processed)} of {plural(b.records, 'event')} processed, {plural(b.calls, 'call')} announced.
      </p>
      <progress class="bl-progress" max={Math.max(b.records, 1)} value={b.state === 'done' ? b.records : b.processed}
        aria-label="Events processed" />
      <p class="muted small">
        Asked for <When at={b.requested_at} />
        {b.updated_at && <>, last report <When at={b.updated_at} /></>}.
      </p>
      {b.error && (
        <div class="alert alert-error" role="alert">
          <strong>Error:</strong> {b.error}
        </div>
      )}
    </section>
  );
}
