import { useId, useState } from 'preact/hooks';
import { api, canWrite, sentence, type Project, type Sink, type SinkTestResult } from '../api';
import { useAction, useConfirmRemoval, useLoad } from '../hooks';
import { ConfirmDialog, CopyButton, ErrorMessage, Field, LoadStatus, PageHeader } from '../ui';

type Kind = 'webhook' | 'chat' | 'slack_app';
type Format = 'auto' | 'slack' | 'discord' | 'teams';

interface Form {
  kind: Kind;
  url: string;
  method: string;
  headers: { name: string; value: string }[];
  format: Format;
  text_template: string;
  /** slack_app: typed tokens only; "" keeps the saved one (they are write-only). */
  bot_token: string;
  signing_secret: string;
  channel: string;
}

const emptyForm: Form = {
  kind: 'webhook', url: '', method: 'POST', headers: [], format: 'auto', text_template: '', bot_token: '', signing_secret: '', channel: '',
};

function formOf(s: Sink): Form {
  return {
    kind: s.kind, url: s.url ?? '', method: s.method ?? 'POST',
    headers: Object.entries(s.headers ?? {}).map(([name, value]) => ({ name, value })),
    format: s.format ?? 'auto', text_template: s.text_template ?? '', bot_token: '', signing_secret: '', channel: s.channel ?? '',
  };
}

/** A saved write-only credential: the answer's *_set flag, or its redacted value. */
const isSet = (flag: boolean | undefined, value: string | undefined) => !!flag || !!value;

function bodyOf(f: Form, creating: boolean) {
  if (f.kind === 'slack_app') {
    const b: Record<string, unknown> = { channel: f.channel.trim() };
    if (creating) b.kind = f.kind;
    if (f.bot_token.trim()) b.bot_token = f.bot_token.trim();
    if (f.signing_secret.trim()) b.signing_secret = f.signing_secret.trim();
    return b;
  }
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

/** A destination in words: its kind and where it sends. */
export function sinkName(s: Sink): string {
  if (s.kind === 'slack_app') return `Slack app ${s.channel ?? ''}`.trim();
  return `${s.kind === 'chat' ? 'chat' : 'webhook'} ${s.url}`;
}

/** How to wire a Slack app to a slack_app destination: its buttons post to the interactions URL. */
function SlackAppSteps({ sink }: { sink: Sink }) {
  const url = sink.interactions_url;
  const id = useId();
  return (
    <div class="slack-steps">
      {url && (
        <div class="copy-row">
          <label for={id}>Interactions URL</label>
          <input id={id} class="mono" readOnly value={url} />
          <CopyButton text={url} label="Copy the interactions URL" />
        </div>
      )}
      {url && !url.startsWith('https://') && (
        <div class="alert alert-warn" role="note">
          <strong>Slack needs HTTPS:</strong> it posts button presses only to an https:// address it can reach. This receiver's
          public URL is plain http, so set <code>SVC_PUBLIC_RECEIVER_URL</code> to its public HTTPS address before pasting it.
        </div>
      )}
      <ol class="setup-steps">
        <li>
          <span class="step-where">Interactivity &amp; Shortcuts:</span> turn Interactivity on and paste the interactions URL as the
          {' '}<strong>Request URL</strong>, so the incident buttons (Acknowledge, Resolve, Mute 1 h, Investigate again) reach this project.
        </li>
        <li>
          <span class="step-where">OAuth &amp; Permissions:</span> add the bot token scope <code>chat:write</code>, install the app to
          your workspace, and use its <strong>Bot User OAuth Token</strong> (<code>xoxb-…</code>) here.
        </li>
        <li>
          <span class="step-where">In Slack:</span> invite the bot to the channel (<code>/invite @your-app</code> in{' '}
          <code>{sink.channel || '#channel'}</code>), or it cannot post there.
        </li>
      </ol>
    </div>
  );
}

export function DestinationsPage({ project }: { project: Project }) {
  const base = `/projects/${encodeURIComponent(project.id)}/sinks`;
  const writable = canWrite(project.role);
  const list = useLoad(() => api<{ sinks: Sink[] }>('GET', base).then((r) => r.sinks), [project.id]);
  const sinks = list.data;
  const load = list.reload;
  // null: no form open; '' : adding; an id: editing that one.
  const [editing, setEditing] = useState<string | null>(null);
  // A Slack app destination just created: its interactions URL and the steps to set it up.
  const [created, setCreated] = useState<Sink | null>(null);
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
        Every result your agent sends back goes to each enabled destination: a webhook (signed, Standard Webhooks), a
        chat channel's incoming webhook, or a Slack app that keeps one thread per incident with buttons to act on it.
      </p>
      {!writable && <p class="muted">Only the project's owner and admins add, change and test destinations.</p>}
      {writable && editing !== null && (
        <SinkForm key={editing} base={base} sink={editingSink} onDone={async (saved) => {
          setEditing(null);
          if (saved && saved !== true && saved.kind === 'slack_app') setCreated(saved);
          if (saved) await load();
        }} />
      )}
      {created && (
        <section class="panel panel-once" aria-labelledby="slack-created">
          <div class="detail-head">
            <h2 id="slack-created">Connect your Slack app to {created.channel}</h2>
            <button type="button" class="btn btn-small" onClick={() => setCreated(null)}>Done</button>
          </div>
          <p class="hint">Three steps in your app's settings at api.slack.com/apps; incidents are posted to the channel once they are done.</p>
          <SlackAppSteps sink={created} />
        </section>
      )}
      <LoadStatus load={list} what="destinations" />
      {sinks && sinks.length === 0 && <p class="empty">No destinations yet.{writable && ' Add one to receive results.'}</p>}
      {sinks && sinks.length > 0 && (
        <ul class="cards" aria-label="Destinations">
          {sinks.map((s) => {
            const test = tests[s.id];
            const name = sinkName(s);
            return (
              <li key={s.id} class={'card' + (s.enabled ? '' : ' card-off')} aria-label={`Destination ${name}`}>
                <div class="card-main">
                  <div class="card-title">
                    <span class="badge">
                      {s.kind === 'slack_app' ? 'Slack app' : s.kind === 'chat' ? `Chat · ${formatNames[s.format ?? 'auto']}` : `Webhook · ${s.method}`}
                    </span>
                    <span class={'state ' + (s.enabled ? 'state-on' : 'state-off')}>{s.enabled ? '● Enabled' : '○ Disabled'}</span>
                  </div>
                  {s.kind === 'slack_app' ? (
                    <>
                      <p class="url"><strong class="mono">{s.channel}</strong> <span class="muted small">one thread per incident</span></p>
                      <p class="muted small">
                        Bot token {isSet(s.bot_token_set, s.bot_token) ? 'set' : 'not set'} · Signing secret{' '}
                        {isSet(s.signing_secret_set, s.signing_secret) ? 'set' : 'not set'}
                      </p>
                      {s.interactions_url && (
                        <details class="slack-details">
                          <summary>Interactions URL and Slack setup</summary>
                          <SlackAppSteps sink={s} />
                        </details>
                      )}
                    </>
                  ) : (
                    <p class="mono url">{s.url}</p>
                  )}
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
          <span class="mono">{deleting.item && (deleting.item.kind === 'slack_app' ? deleting.item.channel : deleting.item.url)}</span> stops
          receiving results at once. This cannot be undone.
        </p>
      </ConfirmDialog>
    </>
  );
}

/**
 * A write-only credential: a password box. Once saved it reads "set" with a Replace
 * button; typing a new one replaces it on save, and an empty box keeps the saved one.
 */
function SecretField(props: { label: string; value: string; saved: boolean; placeholder: string; hint: string; onInput: (v: string) => void }) {
  const [replacing, setReplacing] = useState(!props.saved);
  const id = useId();
  if (!replacing) {
    return (
      <div class="field">
        <span class="field-label" id={id}>{props.label}</span>
        <div class="secret-set" aria-labelledby={id} role="group">
          <span class="state state-on">✓ set</span>
          <button type="button" class="btn btn-small" aria-label={`Replace the ${props.label.toLowerCase()}`} onClick={() => setReplacing(true)}>
            Replace
          </button>
        </div>
        <p class="hint">{props.hint}</p>
      </div>
    );
  }
  return (
    <Field label={props.label} type="password" autocomplete="off" required={!props.saved} value={props.value}
      placeholder={props.saved ? 'a new one replaces the saved one' : props.placeholder}
      hint={props.hint} onInput={(e) => props.onInput(e.currentTarget.value)} />
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

function SinkForm({ base, sink, onDone }: { base: string; sink?: Sink; onDone: (saved: Sink | boolean) => void }) {
  const creating = !sink;
  const [f, setF] = useState<Form>(sink ? formOf(sink) : emptyForm);
  const saving = useAction();
  const id = useId();
  const set = <K extends keyof Form>(k: K, v: Form[K]) => setF({ ...f, [k]: v });
  const ready = f.kind === 'slack_app'
    ? !!f.channel.trim() && (!creating || (!!f.bot_token.trim() && !!f.signing_secret.trim()))
    : !!f.url.trim();

  const submit = (e: Event) => {
    e.preventDefault();
    saving.run(async () => {
      if (creating) onDone((await api<Sink>('POST', base, bodyOf(f, true))) ?? true);
      else onDone((await api<Sink>('PATCH', `${base}/${encodeURIComponent(sink.id)}`, bodyOf(f, false))) ?? true);
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
            <label class="radio">
              <input type="radio" name="kind" checked={f.kind === 'slack_app'} onChange={() => set('kind', 'slack_app')} />
              <span><strong>Slack app</strong> <span class="muted">a thread per incident, with buttons to acknowledge, resolve, mute</span></span>
            </label>
          </fieldset>
        )}
        {f.kind !== 'slack_app' && (
          <Field label={f.kind === 'chat' ? 'Incoming webhook URL' : 'URL'} type="url" required value={f.url}
            placeholder={f.kind === 'chat' ? 'https://hooks.slack.com/services/…' : 'https://example.com/hooks/results'}
            onInput={(e) => set('url', e.currentTarget.value)} />
        )}
        {f.kind === 'slack_app' ? (
          <>
            <Field label="Channel" required value={f.channel} placeholder="#incidents or C0123456789"
              hint="Where incidents are posted: the channel's name or id. Invite the bot there."
              onInput={(e) => set('channel', e.currentTarget.value)} />
            <SecretField label="Bot token" value={f.bot_token} saved={!!sink && isSet(sink.bot_token_set, sink.bot_token)}
              placeholder="xoxb-…" hint="The app's Bot User OAuth Token, with the chat:write scope."
              onInput={(v) => set('bot_token', v)} />
            <SecretField label="Signing secret" value={f.signing_secret}
              saved={!!sink && isSet(sink.signing_secret_set, sink.signing_secret)}
              placeholder="from Basic Information → App Credentials"
              hint="From your app's Basic Information → App Credentials. It proves a button press came from Slack; requests that fail the check change nothing."
              onInput={(v) => set('signing_secret', v)} />
            <p class="hint secret-note">Both are write-only: once saved they are never shown again, only replaced.</p>
          </>
        ) : f.kind === 'webhook' ? (
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
          <button type="submit" class="btn btn-primary" disabled={saving.busy || !ready}>
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
