import { useEffect, useId, useState } from 'preact/hooks';
import { api, canWrite, type Project, type Source, type SourceTest } from '../api';
import { useAction, useConfirmRemoval, useLoad } from '../hooks';
import { ConfirmDialog, CopyButton, ErrorMessage, Field, LoadStatus, PageHeader, When } from '../ui';

/** The curl line that pushes a first payload to a source. */
export function sourceCurl(s: Source, key: string): string {
  return (
    `curl -X POST '${s.ingest_url}' \\\n` +
    `  -H 'Authorization: Bearer ${key}' \\\n` +
    `  -H 'Content-Type: application/json' \\\n` +
    `  -d '{"action": "opened", "repo": {"name": "web"}}'`
  );
}

interface Form {
  name: string;
  event_type: string;
  event_type_field: string;
  text_template: string;
  event_time_field: string;
  labels: { name: string; path: string }[];
}

const emptyForm: Form = { name: '', event_type: '', event_type_field: '', text_template: '', event_time_field: '', labels: [] };

function spec(f: Form) {
  const labels = Object.fromEntries(f.labels.filter((l) => l.name.trim()).map((l) => [l.name.trim(), l.path.trim()]));
  return {
    name: f.name.trim(), connector: 'webhook', event_type: f.event_type.trim(), event_type_field: f.event_type_field.trim(),
    text_template: f.text_template, event_time_field: f.event_time_field.trim(), labels,
  };
}

const samplePayload = '{\n  "action": "opened",\n  "repo": {"name": "web"},\n  "sender": {"login": "ada"}\n}';

export function SourcesPage({ project }: { project: Project }) {
  const base = `/projects/${encodeURIComponent(project.id)}/sources`;
  const writable = canWrite(project.role);
  const list = useLoad(() => api<{ sources: Source[] }>('GET', base).then((r) => r.sources), [project.id]);
  const sources = list.data;
  const [f, setF] = useState<Form>(emptyForm);
  const creating = useAction();
  const [created, setCreated] = useState<Source | null>(null);
  // What the sample is tested against: the form's unsaved settings, or a saved source.
  const [against, setAgainst] = useState('form');
  const [payload, setPayload] = useState(samplePayload);
  const [testResult, setTestResult] = useState<SourceTest | null>(null);
  const [testError, setTestError] = useState<unknown>(null);
  const id = useId();
  const deleting = useConfirmRemoval(
    (s: Source) => api('DELETE', `${base}/${encodeURIComponent(s.id)}`),
    (s) => {
      if (created?.id === s.id) setCreated(null);
      if (against === s.id) setAgainst('form');
      return list.reload();
    },
  );
  const busy = creating.busy || deleting.busy;

  // Members have no form to test against: they test a saved source.
  useEffect(() => {
    if (!writable && against === 'form' && sources?.length) setAgainst(sources[0].id);
  }, [sources]);

  const set = <K extends keyof Form>(k: K, v: Form[K]) => setF({ ...f, [k]: v });

  const create = (e: Event) => {
    e.preventDefault();
    creating.run(async () => {
      const s = await api<Source>('POST', base, spec(f));
      setCreated(s);
      setF(emptyForm);
      setTestResult(null);
      await list.reload();
      setAgainst(s.id); // the next sample is most likely for the source just made
    });
  };

  const test = async (e: Event) => {
    e.preventDefault();
    setTestError(null);
    setTestResult(null);
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload);
    } catch (err) {
      setTestError(new Error(`The sample payload is not valid JSON: ${(err as Error).message}`));
      return;
    }
    try {
      const body = against === 'form' ? { source: { ...spec(f), name: f.name.trim() || 'draft' }, payload: parsed }
        : { source_id: against, payload: parsed };
      setTestResult(await api<SourceTest>('POST', base + '/test', body));
    } catch (err) {
      setTestError(err);
    }
  };

  return (
    <>
      <PageHeader title="Push sources" project={project.name} />
      <p class="lede">
        A push source gives a system that can only send webhooks (GitHub, Stripe, your CI) its own ingest URL. Each
        payload becomes an event with an event type, a text and labels taken from its fields.
      </p>
      {created?.api_key && (
        <section class="panel panel-once" aria-labelledby="src-once">
          <h2 id="src-once">Your new source “{created.name}”</h2>
          <p>
            <strong>Copy the key now: it is shown only once.</strong> The list keeps only its prefix.
          </p>
          <div class="copy-row">
            <label for="src-url">Ingest URL</label>
            <input id="src-url" class="mono" readOnly value={created.ingest_url} onFocus={(e) => e.currentTarget.select()} />
            <CopyButton text={created.ingest_url} label="Copy the ingest URL" />
          </div>
          <div class="copy-row">
            <label for="src-key">Ingest key</label>
            <input id="src-key" class="mono" readOnly value={created.api_key} onFocus={(e) => e.currentTarget.select()} />
            <CopyButton text={created.api_key} label="Copy the ingest key" />
          </div>
          <p>Push a first payload:</p>
          <div class="copy-row copy-row-top">
            <pre class="code" aria-label="curl command to push a first payload">{sourceCurl(created, created.api_key)}</pre>
            <CopyButton text={sourceCurl(created, created.api_key)} label="Copy the curl command" />
          </div>
          <button type="button" class="btn" onClick={() => setCreated(null)}>
            I have saved the key
          </button>
        </section>
      )}
      <div class="two-col">
        {writable ? (
          <section class="panel" aria-labelledby={id + '-new'}>
            <h2 id={id + '-new'}>New source</h2>
            <form onSubmit={create}>
              <Field label="Source name" required maxLength={100} value={f.name} placeholder="e.g. github"
                onInput={(e) => set('name', e.currentTarget.value)} hint="Records carry it as _source." />
              <Field label="Event type" value={f.event_type} placeholder="webhook_event"
                onInput={(e) => set('event_type', e.currentTarget.value)} hint="Fixed type of its events (_event_type)." />
              <Field label="Event type field" value={f.event_type_field} placeholder="action"
                onInput={(e) => set('event_type_field', e.currentTarget.value)}
                hint="Dot path of the payload field that holds the type; overrides the fixed one when present." />
              <Field label="Text template" value={f.text_template} placeholder="{repo.name}: {action}"
                onInput={(e) => set('text_template', e.currentTarget.value)} />
              <Field label="Event time field" value={f.event_time_field} placeholder="created_at"
                onInput={(e) => set('event_time_field', e.currentTarget.value)}
                hint="ISO 8601 or unix time; empty: the time received." />
              <fieldset class="headers">
                <legend>Labels</legend>
                {f.labels.length === 0 && <p class="hint">None. A label copies a payload field, e.g. repo ← repo.name.</p>}
                {f.labels.map((l, i) => (
                  <div class="header-row" key={i}>
                    <Field label={`Label ${i + 1} name`} value={l.name} placeholder="repo"
                      onInput={(e) => set('labels', f.labels.map((x, j) => (j === i ? { ...x, name: e.currentTarget.value } : x)))} />
                    <Field label={`Label ${i + 1} field path`} value={l.path} placeholder="repo.name"
                      onInput={(e) => set('labels', f.labels.map((x, j) => (j === i ? { ...x, path: e.currentTarget.value } : x)))} />
                    <button type="button" class="btn btn-small btn-danger-quiet" aria-label={`Remove label ${i + 1}`}
                      onClick={() => set('labels', f.labels.filter((_, j) => j !== i))}>
                      Remove
                    </button>
                  </div>
                ))}
                <button type="button" class="btn btn-small" onClick={() => set('labels', [...f.labels, { name: '', path: '' }])}>
                  Add label
                </button>
              </fieldset>
              <ErrorMessage error={creating.error} />
              <button type="submit" class="btn btn-primary" disabled={busy || !f.name.trim()}>
                Create source
              </button>
            </form>
          </section>
        ) : (
          <p class="muted">Only the project's owner and admins create and delete push sources.</p>
        )}
        <section class="panel" aria-labelledby={id + '-test'}>
          <h2 id={id + '-test'}>Test a sample payload</h2>
          <form onSubmit={test}>
            <div class="field">
              <label for={id + '-against'}>Mapping</label>
              <select id={id + '-against'} value={against} onChange={(e) => setAgainst(e.currentTarget.value)}>
                {writable && <option value="form">The new source's settings (unsaved)</option>}
                {(sources ?? []).map((s) => (
                  <option key={s.id} value={s.id}>Source {s.name}</option>
                ))}
              </select>
            </div>
            <div class="field">
              <label for={id + '-payload'}>Sample payload (JSON)</label>
              <textarea id={id + '-payload'} class="mono" rows={7} spellcheck={false} value={payload}
                onInput={(e) => setPayload(e.currentTarget.value)} />
            </div>
            <button type="submit" class="btn" disabled={!writable && against === 'form'}>
              Test the mapping
            </button>
          </form>
          <ErrorMessage error={testError} />
          {testResult && (
            <div class="test-result" aria-live="polite">
              {testResult.warnings.length === 0 ? (
                <p class="test-outcome test-ok"><strong>✓ The mapping is complete</strong> for this payload.</p>
              ) : (
                <div class="alert alert-warn" role="status">
                  <strong>{testResult.warnings.length === 1 ? '1 warning' : `${testResult.warnings.length} warnings`}:</strong>
                  <ul aria-label="Warnings">
                    {testResult.warnings.map((w, i) => <li key={i}>{w}</li>)}
                  </ul>
                </div>
              )}
              <p class="small">The event it would store (type <code>{testResult.event_type}</code>):</p>
              <pre class="code" aria-label="The event the source would store">{JSON.stringify(testResult.envelope, null, 2)}</pre>
            </div>
          )}
        </section>
      </div>
      <h2 class="section-title">Sources</h2>
      <LoadStatus load={list} what="push sources" />
      {sources && sources.length === 0 && <p class="empty">No push sources yet.</p>}
      {sources && sources.length > 0 && (
        <table>
          <caption class="sr-only">Push sources of {project.name}</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Event type</th>
              <th scope="col">Ingest URL</th>
              <th scope="col">Key</th>
              <th scope="col">Created</th>
              {writable && <th scope="col"><span class="sr-only">Actions</span></th>}
            </tr>
          </thead>
          <tbody>
            {sources.map((s) => (
              <tr key={s.id}>
                <td>
                  {s.name}
                  {s.labels && Object.keys(s.labels).length > 0 && (
                    <div class="muted small">labels: {Object.keys(s.labels).join(', ')}</div>
                  )}
                </td>
                <td class="mono">{s.event_type_field ? `${s.event_type_field} (else ${s.event_type})` : s.event_type}</td>
                <td class="url-cell">
                  <span class="mono">{s.ingest_url}</span> <CopyButton text={s.ingest_url} label={`Copy the ingest URL of ${s.name}`} />
                </td>
                <td class="mono">{s.api_key_prefix ? `${s.api_key_prefix}…` : <span class="muted">revoked</span>}</td>
                <td><When at={s.created_at} /></td>
                {writable && (
                  <td class="row-actions">
                    <button type="button" class="btn btn-small btn-danger-quiet" aria-label={`Delete source ${s.name}`}
                      onClick={() => deleting.ask(s)}>
                      Delete
                    </button>
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <ConfirmDialog {...deleting.dialog} busy={busy} title={`Delete source “${deleting.item?.name ?? ''}”?`}
        confirmLabel="Delete source">
        <p>Its ingest URL and key stop working within a second. Events already stored stay.</p>
      </ConfirmDialog>
    </>
  );
}
