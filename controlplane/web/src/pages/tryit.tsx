// Try it: the pipeline as it stands in the form, saved or not, run by the data plane's
// dry run (docs/contract.md#section-12) over the project's newest stored records: which matched,
// the records as the transforms left them, and the bodies the agent would receive.
// Nothing is sent or stored.
import { useId, useState } from 'preact/hooks';
import type { Project } from '../api';
import { consoleApi, type DryRun } from '../console';
import { JsonBlock } from '../json';
import { ErrorMessage } from '../ui';

/** What the page shows of long answers; the counts always say how many there are. */
const SHOW = 20;

export function TryIt({ project, pipeline, blocked }: { project: Project; pipeline: Record<string, unknown>; blocked: boolean }) {
  const id = useId();
  const [limit, setLimit] = useState('100');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [out, setOut] = useState<DryRun | null>(null);

  const n = Math.min(1000, Math.max(1, Math.floor(Number(limit)) || 100));
  const run = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      // The answer carries the matched records themselves, however far back they are.
      const r = await consoleApi<DryRun>(project.id, 'POST', '/pipeline/dry-run', { pipeline, limit: n });
      setOut(r);
    } catch (err) {
      setOut(null);
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  const recs = out ? out.records : [];
  const calls = out ? out.calls.length + (out.calls_left_out ?? 0) : 0;
  // Incident mode answers the incidents the records would open: a count, or the incidents.
  const incidents = out?.incidents === undefined ? null : Array.isArray(out.incidents) ? out.incidents.length : out.incidents;
  const shown = Math.min(SHOW, recs.length);
  const leftOut = out?.records_left_out ?? 0;
  return (
    <section id="try-it" class="panel try-it" aria-labelledby={id + '-h'}>
      <h2 id={id + '-h'}>Try it</h2>
      <p class="hint">
        Runs the pipeline above, as it is now (saved or not), over the project's newest stored records. Nothing is sent to the
        agent and nothing is stored; cooldowns and call limits are not applied.
      </p>
      <form class="inline-form" onSubmit={run} aria-label="Try the pipeline">
        <div class="field field-narrow">
          <label for={id}>Records to try</label>
          <input id={id} type="number" min={1} max={1000} value={limit} onInput={(e) => setLimit(e.currentTarget.value)} />
        </div>
        <button type="submit" class="btn btn-primary" disabled={busy || blocked}>{busy ? 'Running…' : 'Try it'}</button>
        {blocked && <span class="muted small">Fix the problems above first.</span>}
      </form>
      <ErrorMessage error={error} />
      {out && (
        <div class="try-result" role="region" aria-label="Try it result">
          <p class="try-summary" role="status">
            <strong>{out.matched} of {out.evaluated}</strong> records matched
            {' · '}
            {out.mode === 'incident' || incidents !== null ? (
              <strong class="try-incidents">
                {incidents ?? 0} incident{incidents === 1 ? '' : 's'}, {calls} call{calls === 1 ? '' : 's'}
              </strong>
            ) : (
              <>{calls} agent call{calls === 1 ? '' : 's'}</>
            )}
            {' · '}{out.mode === 'incident' ? 'incident mode' : out.mode === 'window' ? 'window mode' : 'legacy mode'}
            {out.errors.length > 0 && <> · <span class="check-bad">{out.errors.length + (out.errors_left_out ?? 0)} errors</span></>}
            {out.timed_out && ' · stopped at its time limit'}
            {out.truncated && ' · fewer records than asked (large records)'}
          </p>
          {out.errors.length > 0 && (
            <div class="alert alert-warn">
              <strong>Errors on some records:</strong>
              <ul>
                {out.errors.slice(0, SHOW).map((e) => <li key={e.seq}>Record #{e.seq}: {e.message}</li>)}
              </ul>
            </div>
          )}
          <h3>Matched records</h3>
          {out.matched === 0 ? (
            <p class="empty">No record matched the trigger.</p>
          ) : (
            <table>
              <caption class="sr-only">Records the trigger matched</caption>
              <thead><tr><th scope="col" class="num">#</th><th scope="col">Stored</th><th scope="col">Signal</th><th scope="col">Record</th></tr></thead>
              <tbody>
                {recs.slice(0, SHOW).map((e) => (
                  <tr key={e.seq}>
                    <td class="num">{e.seq}</td>
                    <td class="mono small">{e.time}</td>
                    <td>{e.signal}</td>
                    <td class="mono small clip">{JSON.stringify(e.record)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          {out.matched > shown && <p class="muted small">Showing {shown} of {out.matched}.</p>}
          {leftOut > 0 && <p class="muted small">{leftOut} matched record{leftOut === 1 ? '' : 's'} left out of the answer (too large).</p>}
          {recs.length > 0 && (
            <>
              <h3>After the transforms</h3>
              {recs.slice(0, SHOW).map((r, i) => (
                <JsonBlock key={r.seq} value={r.transformed} label={`Transformed record ${i + 1}`} maxHeight={240} />
              ))}
            </>
          )}
          {out.calls.length > 0 && out.mode === 'incident' && <IncidentCalls calls={out.calls} />}
          {out.calls.length > 0 && out.mode !== 'incident' && (
            <>
              <h3>What the agent would receive</h3>
              {out.calls.slice(0, SHOW).map((c, i) => (
                <JsonBlock key={i} value={JSON.stringify(c)} label={`Call ${i + 1} body`} maxHeight={240} />
              ))}
              {(out.calls_left_out ?? 0) > 0 && <p class="muted small">{out.calls_left_out} more calls left out of the answer.</p>}
            </>
          )}
        </div>
      )}
    </section>
  );
}

interface IncidentCallBody {
  incident?: { id?: string; title?: string; fingerprint?: string; status?: string };
  reason?: string;
  events?: unknown[];
  events_left_out?: number;
  window?: unknown[];
}

const reasonLabel: Record<string, string> = {
  opened: 'Opening call',
  updated: 'Update',
  resolved: 'Closing call',
  reinvestigate: 'Investigate again',
};

/** Incident mode's calls as a table (which incident, why, what it carries); each body on demand. */
function IncidentCalls({ calls }: { calls: unknown[] }) {
  const rows = calls.slice(0, SHOW).map((c) => (c && typeof c === 'object' ? (c as IncidentCallBody) : {}));
  return (
    <>
      <h3>Calls the agent would receive</h3>
      <table class="try-calls">
        <caption class="sr-only">Incident calls, in the order they would be made</caption>
        <thead>
          <tr><th scope="col" class="num">#</th><th scope="col">Incident</th><th scope="col">Call</th><th scope="col" class="num">New events</th>
            <th scope="col" class="num">Window</th><th scope="col"><span class="sr-only">Body</span></th></tr>
        </thead>
        <tbody>
          {rows.map((c, i) => (
            <tr key={i}>
              <td class="num">{i + 1}</td>
              <td>
                <strong>{c.incident?.title || c.incident?.fingerprint || '—'}</strong>
                {c.incident?.fingerprint && <span class="ifp mono">{c.incident.fingerprint}</span>}
              </td>
              <td>{reasonLabel[c.reason ?? ''] ?? c.reason ?? '—'}</td>
              <td class="num">{(c.events?.length ?? 0) + (c.events_left_out ?? 0)}</td>
              <td class="num">{c.window?.length ?? 0}</td>
              <td class="try-body">
                <details>
                  <summary>Body</summary>
                  <JsonBlock value={calls[i]} label={`Call ${i + 1} body`} maxHeight={280} />
                </details>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
