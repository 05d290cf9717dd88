import { useId, useState } from 'preact/hooks';
import { api, canWrite, sentence, type Project, type Sink, type SinkTestResult } from '../api';
import { useAction, useConfirmRemoval, useLoad } from '../hooks';
import { ConfirmDialog, ErrorMessage, Field, LoadStatus, PageHeader } from '../ui';

type Kind = 'webhook' | 'chat';
type Format = 'auto' | 'slack' | 'discord' | 'teams';

interface Form {
  kind: Kind;
  url: string;
  method: string;
  headers: { name: string; value: string }[];
  format: Format;
  text_template: string;
}

const emptyForm: Form = { kind: 'webhook', url: '', method: 'POST', headers: [], format: 'auto', text_template: '' };

function formOf(s: Sink): Form {
  return {
    kind: s.kind, url: s.url, method: s.method ?? 'POST',
    headers: Object.entries(s.headers ?? {}).map(([name, value]) => ({ name, value })),
    format: s.format ?? 'auto', text_template: s.text_template ?? '',
  };
}

function bodyOf(f: Form, creating: boolean) {
  const b: Record<string, unknown> = { url: f.url.trim() };
  if (creating) b.kind = f.kind;
  if (f.kind === 'webhook') {
    b.method = f.method;
    b.headers = Object.fromEntries(f.headers.filter((h) => h.name.trim()).map((h) => [h.name.trim(), h.value]));
  } else {
    b.format = f.format;
    b.text_template = f.text_template;
  }
  return b;
}

const formatNames: Record<Format, string> = { auto: 'Auto (by the URL)', slack: 'Slack', discord: 'Discord', teams: 'Microsoft Teams' };

export function DestinationsPage({ project }: { project: Project }) {
  const base = `/projects/${encodeURIComponent(project.id)}/sinks`;
  const writable = canWrite(project.role);
  const list = useLoad(() => api<{ sinks: Sink[] }>('GET', base).then((r) => r.sinks), [project.id]);
  const sinks = list.data;
  const load = list.reload;
  // null: no form open; '' : adding; an id: editing that one.
  const [editing, setEditing] = useState<string | null>(null);
  const deleting = useConfirmRemoval((s: Sink) => api('DELETE', `${base}/${encodeURIComponent(s.id)}`), load);
  const [rowError, setRowError] = useState<{ id: string; error: unknown } | null>(null);
  const [tests, setTests] = useState<Record<string, SinkTestResult | 'sending'>>({});

  const toggle = async (s: Sink) => {
    setRowError(null);
    try {
      await api('PATCH', `${base}/${encodeURIComponent(s.id)}`, { enabled: !s.enabled });
      await load();
    } catch (err) {
      setRowError({ id: s.id, error: err });
    }
  };

  const sendTest = async (s: Sink) => {
    setRowError(null);
    setTests((t) => ({ ...t, [s.id]: 'sending' }));
    try {
      const r = await api<SinkTestResult>('POST', `${base}/${encodeURIComponent(s.id)}/test`);
      setTests((t) => ({ ...t, [s.id]: r }));
    } catch (err) {
      setTests(({ [s.id]: _, ...t }) => t);
      setRowError({ id: s.id, error: err });
    }
  };

  const editingSink = sinks?.find((s) => s.id === editing);
  return (
    <>
      <PageHeader title="Destinations" project={project.name}>
        {writable && editing === null && (
          <button type="button" class="btn btn-primary" onClick={() => setEditing('')}>
            Add destination
          </button>
        )}
      </PageHeader>
      <p class="lede">
        Every result your agent sends back goes to each enabled destination: a webhook (signed, Standard Webhooks) or a
        chat channel's incoming webhook.
      </p>
      {!writable && <p class="muted">Only the project's owner and admins add, change and test destinations.</p>}
      {writable && editing !== null && (
        <SinkForm key={editing} base={base} sink={editingSink} onDone={async (saved) => {
          setEditing(null);
          if (saved) await load();
        }} />
      )}
      <LoadStatus load={list} what="destinations" />
      {sinks && sinks.length === 0 && <p class="empty">No destinations yet.{writable && ' Add one to receive results.'}</p>}
      {sinks && sinks.length > 0 && (
        <ul class="cards" aria-label="Destinations">
          {sinks.map((s) => {
            const test = tests[s.id];
            const name = `${s.kind === 'chat' ? 'chat' : 'webhook'} ${s.url}`;
            return (
              <li key={s.id} class={'card' + (s.enabled ? '' : ' card-off')} aria-label={`Destination ${name}`}>
                <div class="card-main">
                  <div class="card-title">
                    <span class="badge">{s.kind === 'chat' ? `Chat · ${formatNames[s.format ?? 'auto']}` : `Webhook · ${s.method}`}</span>
                    <span class={'state ' + (s.enabled ? 'state-on' : 'state-off')}>{s.enabled ? '● Enabled' : '○ Disabled'}</span>
                  </div>
                  <p class="mono url">{s.url}</p>
                  {s.kind === 'webhook' && s.headers && Object.keys(s.headers).length > 0 && (
                    <p class="muted small">Headers: {Object.keys(s.headers).join(', ')}</p>
                  )}
                  {s.kind === 'chat' && s.text_template && <p class="muted small">Template: <code>{s.text_template}</code></p>}
                </div>
                {writable && (
                  <div class="card-actions">
                    <button type="button" class="btn btn-small" disabled={test === 'sending'}
                      aria-label={`Send a test message to ${name}`} onClick={() => sendTest(s)}>
                      {test === 'sending' ? 'Sending…' : 'Send test message'}
                    </button>
                    <button type="button" class="btn btn-small" aria-label={`${s.enabled ? 'Disable' : 'Enable'} ${name}`}
                      onClick={() => toggle(s)}>
                      {s.enabled ? 'Disable' : 'Enable'}
                    </button>
                    <button type="button" class="btn btn-small" aria-label={`Edit ${name}`} onClick={() => setEditing(s.id)}>
                      Edit
                    </button>
                    <button type="button" class="btn btn-small btn-danger-quiet" aria-label={`Delete ${name}`}
                      onClick={() => deleting.ask(s)}>
                      Delete
                    </button>
                  </div>
                )}
                {rowError?.id === s.id && <ErrorMessage error={rowError.error} />}
                {test && test !== 'sending' && <TestOutcome r={test} />}
              </li>
            );
          })}
        </ul>
      )}
      <ConfirmDialog {...deleting.dialog} title="Delete this destination?" confirmLabel="Delete destination">
        <p>
          <span class="mono">{deleting.item?.url}</span> stops receiving results at once. This cannot be undone.
        </p>
      </ConfirmDialog>
    </>
  );
}

function TestOutcome({ r }: { r: SinkTestResult }) {
  return (
    <div class={'test-outcome ' + (r.delivered ? 'test-ok' : 'test-bad')} role="status">
      <p>
        <strong>{r.delivered ? '✓ Test message delivered' : '✗ Test message not delivered'}</strong>
        {r.status_code > 0 && <> · HTTP {r.status_code}</>}
        {' · '}
        {r.latency_ms} ms
      </p>
      {r.error && <p>{sentence(r.error)}</p>}
      {r.response_excerpt && (
        <details>
          <summary>The destination's answer</summary>
          <pre class="code">{r.response_excerpt}</pre>
        </details>
      )}
    </div>
  );
}

function SinkForm({ base, sink, onDone }: { base: string; sink?: Sink; onDone: (saved: boolean) => void }) {
  const creating = !sink;
  const [f, setF] = useState<Form>(sink ? formOf(sink) : emptyForm);
  const saving = useAction();
  const id = useId();
  const set = <K extends keyof Form>(k: K, v: Form[K]) => setF({ ...f, [k]: v });

  const submit = (e: Event) => {
    e.preventDefault();
    saving.run(async () => {
      if (creating) await api('POST', base, bodyOf(f, true));
      else await api('PATCH', `${base}/${encodeURIComponent(sink.id)}`, bodyOf(f, false));
      onDone(true);
    });
  };

  return (
    <section class="panel" aria-labelledby={id}>
      <h2 id={id}>{creating ? 'New destination' : 'Edit destination'}</h2>
      <form onSubmit={submit}>
        {creating && (
          <fieldset class="radio-row">
            <legend>Kind</legend>
            <label class="radio">
              <input type="radio" name="kind" checked={f.kind === 'webhook'} onChange={() => set('kind', 'webhook')} />
              <span><strong>Webhook</strong> <span class="muted">the result as JSON, signed</span></span>
            </label>
            <label class="radio">
              <input type="radio" name="kind" checked={f.kind === 'chat'} onChange={() => set('kind', 'chat')} />
              <span><strong>Chat</strong> <span class="muted">a message in Slack, Discord or Teams</span></span>
            </label>
          </fieldset>
        )}
        <Field label={f.kind === 'chat' ? 'Incoming webhook URL' : 'URL'} type="url" required value={f.url}
          placeholder={f.kind === 'chat' ? 'https://hooks.slack.com/services/…' : 'https://example.com/hooks/results'}
          onInput={(e) => set('url', e.currentTarget.value)} />
        {f.kind === 'webhook' ? (
          <>
            <div class="field field-narrow">
              <label for={id + '-method'}>Method</label>
              <select id={id + '-method'} value={f.method} onChange={(e) => set('method', e.currentTarget.value)}>
                <option>POST</option>
                <option>PUT</option>
                <option>PATCH</option>
              </select>
            </div>
            <fieldset class="headers">
              <legend>Headers</legend>
              {f.headers.length === 0 && <p class="hint">None. The signature and X-Request-Id headers are always sent.</p>}
              {f.headers.map((h, i) => (
                <div class="header-row" key={i}>
                  <Field label={`Header ${i + 1} name`} value={h.name} placeholder="Authorization"
                    onInput={(e) => set('headers', f.headers.map((x, j) => (j === i ? { ...x, name: e.currentTarget.value } : x)))} />
                  <Field label={`Header ${i + 1} value`} value={h.value} placeholder="Bearer …"
                    onInput={(e) => set('headers', f.headers.map((x, j) => (j === i ? { ...x, value: e.currentTarget.value } : x)))} />
                  <button type="button" class="btn btn-small btn-danger-quiet" aria-label={`Remove header ${i + 1}`}
                    onClick={() => set('headers', f.headers.filter((_, j) => j !== i))}>
                    Remove
                  </button>
                </div>
              ))}
              <button type="button" class="btn btn-small" onClick={() => set('headers', [...f.headers, { name: '', value: '' }])}>
                Add header
              </button>
            </fieldset>
          </>
        ) : (
          <>
            <div class="field field-narrow">
              <label for={id + '-format'}>Platform</label>
              <select id={id + '-format'} value={f.format} onChange={(e) => set('format', e.currentTarget.value as Format)}>
                {(Object.keys(formatNames) as Format[]).map((k) => (
                  <option key={k} value={k}>{formatNames[k]}</option>
                ))}
              </select>
            </div>
            <div class="field">
              <label for={id + '-tpl'}>Text template</label>
              <textarea id={id + '-tpl'} class="mono" rows={2} value={f.text_template} aria-describedby={id + '-tpl-hint'}
                placeholder="{severity}: {summary}" onInput={(e) => set('text_template', e.currentTarget.value)} />
              <p id={id + '-tpl-hint'} class="hint">
                Placeholders name fields of the result, e.g. <code>{'{summary}'}</code> or <code>{'{incident.id}'}</code>.
                Empty: the result's text, summary or message field.
              </p>
            </div>
          </>
        )}
        <ErrorMessage error={saving.error} />
        <div class="save-bar">
          <button type="submit" class="btn btn-primary" disabled={saving.busy || !f.url.trim()}>
            {creating ? 'Add destination' : 'Save destination'}
          </button>
          <button type="button" class="btn" onClick={() => onDone(false)}>
            Cancel
          </button>
        </div>
      </form>
    </section>
  );
}
