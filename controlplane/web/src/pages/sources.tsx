import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { api, canWrite, RawJSON, type Project, type Source, type SourceTest } from '../api';
import { useAction, useConfirmRemoval, useLoad } from '../hooks';
import {
  credentialOf, issuedByProvider, otherSample, parseHeaders, provider, providerOf, providers, schemeName,
  type OtherAuth, type Provider, type ProviderId, type Verification,
} from '../sources/providers';
import { FirstDelivery } from '../sources/firstdelivery';
import { SetupSteps } from '../sources/setup';
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
  provider: ProviderId;
  name: string;
  event_type: string;
  event_type_field: string;
  text_template: string;
  event_time_field: string;
  labels: { name: string; path: string }[];
  // verification
  other: OtherAuth;
  secret: string;
  username: string;
  header: string;
  algorithm: string;
  encoding: string;
  prefix: string;
}

const emptyForm: Form = {
  provider: 'other', name: '', event_type: '', event_type_field: '', text_template: '', event_time_field: '', labels: [],
  other: 'api_key', secret: '', username: '', header: 'X-Signature', algorithm: 'sha256', encoding: 'hex', prefix: '',
};

/** The verification the form asks for; undefined: the source's API key, as before presets. */
function verificationOf(f: Form): Verification | undefined {
  const p = provider(f.provider);
  const scheme = p.scheme ?? (f.other === 'api_key' ? undefined : f.other);
  if (!scheme) return undefined;
  const v: Verification = { scheme };
  const secret = f.secret.trim();
  switch (scheme) {
    case 'basic':
      v.username = f.username.trim();
      break;
    case 'hmac':
      v.header = f.header.trim();
      if (f.algorithm !== 'sha256') v.algorithm = f.algorithm;
      if (f.encoding !== 'hex') v.encoding = f.encoding;
      if (f.prefix) v.prefix = f.prefix;
      if (secret) v.secret = secret;
      break;
    default:
      // A provider-issued secret is pasted; the others the control plane generates.
      if (secret) v.secret = secret;
  }
  return v;
}

function spec(f: Form) {
  const p = provider(f.provider);
  const out: Record<string, unknown> = { name: f.name.trim(), connector: 'webhook' };
  // A preset reads the sender's own fields; the mapping is for the senders without one.
  if (!p.preset) {
    const labels = Object.fromEntries(f.labels.filter((l) => l.name.trim()).map((l) => [l.name.trim(), l.path.trim()]));
    Object.assign(out, {
      event_type: f.event_type.trim(), event_type_field: f.event_type_field.trim(), text_template: f.text_template,
      event_time_field: f.event_time_field.trim(), labels,
    });
  }
  return out;
}

function createBody(f: Form) {
  const p = provider(f.provider);
  const body: Record<string, unknown> = spec(f);
  if (p.preset) body.preset = p.preset;
  const v = verificationOf(f);
  if (v) body.verification = v;
  return body;
}

/** The source just created or rotated: its credential is in these answers only. */
interface Shown {
  source: Source;
  rotated: boolean;
}

export function SourcesPage({ project }: { project: Project }) {
  const base = `/projects/${encodeURIComponent(project.id)}/sources`;
  const writable = canWrite(project.role);
  const list = useLoad(() => api<{ sources: Source[] }>('GET', base).then((r) => r.sources), [project.id]);
  const sources = list.data;
  const [f, setF] = useState<Form>(emptyForm);
  const creating = useAction();
  const [shown, setShown] = useState<Shown | null>(null);
  // What the sample is tested against: the form's unsaved settings, or a saved source.
  const [against, setAgainst] = useState('form');
  const [payload, setPayload] = useState(otherSample);
  const [headers, setHeaders] = useState('');
  const [urlToken, setUrlToken] = useState('');
  const [testResult, setTestResult] = useState<SourceTest | null>(null);
  const [testError, setTestError] = useState<unknown>(null);
  const [rotating, setRotating] = useState<Source | null>(null);
  const [newSecret, setNewSecret] = useState('');
  const rotation = useAction();
  const pasting = useAction();
  const [pasted, setPasted] = useState('');
  const id = useId();
  const deleting = useConfirmRemoval(
    (s: Source) => api('DELETE', `${base}/${encodeURIComponent(s.id)}`),
    (s) => {
      if (shown?.source.id === s.id) setShown(null);
      if (against === s.id) setAgainst('form');
      return list.reload();
    },
  );
  const busy = creating.busy || deleting.busy || rotation.busy;

  // The secret is shown at the top of the page, far from a Rotate button in the list:
  // bring it into view and put focus on its heading, so nobody misses it.
  const onceRef = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    if (!shown) return;
    onceRef.current?.scrollIntoView({ block: 'start' });
    onceRef.current?.focus();
  }, [shown?.source.id, shown?.rotated, credentialOf(shown?.source.verification ?? undefined)?.value]);

  // Members have no form to test against: they test a saved source.
  useEffect(() => {
    if (!writable && against === 'form' && sources?.length) chooseAgainst(sources[0].id);
  }, [sources]);

  const set = <K extends keyof Form>(k: K, v: Form[K]) => setF({ ...f, [k]: v });

  /** The sample and headers of a provider, unless the person typed their own. */
  const applySample = (p: Provider) => {
    const samples = new Set(providers.map((x) => x.sample));
    if (samples.has(payload) || !payload.trim()) setPayload(p.sample);
    const known = new Set(providers.map((x) => x.headers));
    if (known.has(headers) || !headers.trim()) setHeaders(p.headers);
    setTestResult(null);
  };

  const pick = (pid: ProviderId) => {
    const p = provider(pid);
    const prev = provider(f.provider);
    const name = !f.name.trim() || f.name === prev.suggestedName ? p.suggestedName : f.name;
    const username = pid === 'alertmanager' || pid === 'grafana' ? pid : f.other === 'basic' && pid === 'other' ? f.username : '';
    setF({ ...f, provider: pid, name, username, secret: '' });
    if (against === 'form') applySample(p);
  };

  const chooseAgainst = (v: string) => {
    setAgainst(v);
    const s = sources?.find((x) => x.id === v);
    applySample(s ? provider(providerOf(s.preset, s.verification?.scheme)) : provider(f.provider));
  };

  const create = (e: Event) => {
    e.preventDefault();
    creating.run(async () => {
      const s = await api<Source>('POST', base, createBody(f));
      setShown({ source: s, rotated: false });
      setPasted('');
      setF(emptyForm);
      setTestResult(null);
      await list.reload();
      // The next sample is most likely for the source just made.
      setAgainst(s.id);
      applySample(provider(providerOf(s.preset, s.verification?.scheme)));
    });
  };

  const rotate = () => {
    const s = rotating;
    if (!s) return;
    rotation.run(async () => {
      const body = issuedByProvider(s.verification?.scheme) ? { secret: newSecret.trim() } : {};
      const r = await api<Source>('POST', `${base}/${encodeURIComponent(s.id)}/rotate-secret`, body);
      setRotating(null);
      setNewSecret('');
      setShown({ source: { ...s, ...r }, rotated: true });
      setTestResult(null); // a signature check against the old secret no longer holds
      await list.reload();
    });
  };

  // The secret a provider issues after it has the URL, pasted back into the source just made.
  const pasteBack = (e: Event) => {
    e.preventDefault();
    const s = shown?.source;
    if (!s) return;
    pasting.run(async () => {
      const r = await api<Source>('POST', `${base}/${encodeURIComponent(s.id)}/rotate-secret`, { secret: pasted.trim() });
      setShown({ source: { ...s, ...r, verification: { ...(r.verification ?? s.verification!), secret_set: true } }, rotated: false });
      setPasted('');
      await list.reload();
    });
  };

  const test = async (e: Event) => {
    e.preventDefault();
    setTestError(null);
    setTestResult(null);
    try {
      JSON.parse(payload);
    } catch (err) {
      setTestError(new Error(`The sample payload is not valid JSON: ${(err as Error).message}`));
      return;
    }
    const fields: Record<string, unknown> = {};
    if (against === 'form') {
      const draft: Record<string, unknown> = { ...spec(f), name: f.name.trim() || 'draft' };
      const p = provider(f.provider);
      if (p.preset) draft.preset = p.preset;
      // Only a secret typed here can check a signature: a generated one does not exist yet.
      const v = verificationOf(f);
      if (v?.secret) draft.verification = v;
      fields.source = draft;
    } else {
      fields.source_id = against;
    }
    const h = parseHeaders(headers);
    if (Object.keys(h).length) fields.headers = h;
    if (testsURLToken && urlToken.trim()) fields.url_token = urlToken.trim();
    // The payload goes as typed, so that a signature over it can be checked.
    const body = JSON.stringify(fields).slice(0, -1) + (Object.keys(fields).length ? ',' : '') + '"payload":' + payload + '}';
    try {
      setTestResult(await api<SourceTest>('POST', base + '/test', new RawJSON(body)));
    } catch (err) {
      setTestError(err);
    }
  };

  const p = provider(f.provider);
  const scheme = verificationOf(f)?.scheme;
  const testedScheme = against === 'form' ? scheme : sources?.find((x) => x.id === against)?.verification?.scheme;
  const testsURLToken = testedScheme === 'url_token';
  const shownProvider = shown ? provider(providerOf(shown.source.preset, shown.source.verification?.scheme)) : null;
  const credential = shown ? credentialOf(shown.source.verification ?? undefined) : null;
  const needsPaste = shown && issuedByProvider(shown.source.verification?.scheme) && !credential &&
    !(shown.source.verification?.secret_set || shown.source.secret_set);

  return (
    <>
      <PageHeader title="Push sources" project={project.name} />
      <p class="lede">
        A push source gives a system that can only send webhooks (GitHub, Stripe, Alertmanager, your CI) its own
        ingest URL. Pick the sender: the source reads its payloads, checks its signature or password, and stores each
        retry once.
      </p>
      {shown && shownProvider && (
        <section class="panel panel-once" aria-labelledby="src-once">
          <h2 id="src-once" ref={onceRef} tabIndex={-1}>
            {shown.rotated ? `New secret for “${shown.source.name}”` : `Your new source “${shown.source.name}”`}
          </h2>
          {credential ? (
            <p class="once-note" role="note">
              <strong>Copy the {lower(credential.label)} now: you will not see it again.</strong>{' '}
              {shown.rotated ? 'The old one stops working within a second.' : 'Later you can only rotate it.'}
            </p>
          ) : shown.source.api_key && !shown.source.verification ? (
            <p>
              <strong>Copy the key now: it is shown only once.</strong> The list keeps only its prefix.
            </p>
          ) : null}
          <div class="copy-row">
            <label for="src-url">Ingest URL</label>
            <input id="src-url" class="mono" readOnly value={shown.source.ingest_url} onFocus={(e) => e.currentTarget.select()} />
            <CopyButton text={shown.source.ingest_url} label="Copy the ingest URL" />
          </div>
          {credential && (
            <div class="copy-row">
              <label for="src-secret">{credential.label}</label>
              <input id="src-secret" class="mono" readOnly value={credential.value} onFocus={(e) => e.currentTarget.select()} />
              <CopyButton text={credential.value} label={`Copy the ${lower(credential.label)}`} />
            </div>
          )}
          {shown.source.verification ? (
            <>
              <h3 class="setup-title">
                In {shownProvider.id === 'other' ? 'the sender' : shownProvider.id === 'cloudevents' ? 'the producer' : shownProvider.name}
              </h3>
              <SetupSteps provider={shownProvider} url={shown.source.ingest_url} verification={shown.source.verification}
                credential={credential?.value ?? null} />
            </>
          ) : (
            shown.source.api_key && (
              <>
                <div class="copy-row">
                  <label for="src-key">Ingest key</label>
                  <input id="src-key" class="mono" readOnly value={shown.source.api_key} onFocus={(e) => e.currentTarget.select()} />
                  <CopyButton text={shown.source.api_key} label="Copy the ingest key" />
                </div>
                <p>Push a first payload:</p>
                <div class="copy-row copy-row-top">
                  <pre class="code" aria-label="curl command to push a first payload">{sourceCurl(shown.source, shown.source.api_key)}</pre>
                  <CopyButton text={sourceCurl(shown.source, shown.source.api_key)} label="Copy the curl command" />
                </div>
              </>
            )
          )}
          {!shown.rotated && (
            <FirstDelivery projectId={project.id} sourceId={shown.source.id}
              sender={shownProvider.id === 'other' ? 'the sender' : shownProvider.name} />
          )}
          {needsPaste && (
            <form class="inline-form paste-back" onSubmit={pasteBack}>
              <Field label={`${shownProvider.issued?.label ?? 'Signing secret'} from ${shownProvider.name}`} required
                class="mono" value={pasted} autoComplete="off" spellcheck={false}
                placeholder={shownProvider.issued?.placeholder} onInput={(e) => setPasted(e.currentTarget.value)}
                hint={shownProvider.issued?.hint} />
              <button type="submit" class="btn btn-primary" disabled={pasting.busy || !pasted.trim()}>Save the secret</button>
            </form>
          )}
          <ErrorMessage error={pasting.error} />
          <button type="button" class="btn" onClick={() => setShown(null)}>
            {credential ? `I have saved the ${lower(credential.label)}` : shown.source.api_key && !shown.source.verification ? 'I have saved the key' : 'Done'}
          </button>
        </section>
      )}
      <div class="two-col">
        {writable ? (
          <section class="panel" aria-labelledby={id + '-new'}>
            <h2 id={id + '-new'}>New source</h2>
            <form onSubmit={create}>
              <fieldset class="providers">
                <legend>Sender</legend>
                <div class="provider-grid">
                  {providers.map((x) => (
                    <label key={x.id} class="provider">
                      <input type="radio" name={id + '-provider'} value={x.id} checked={f.provider === x.id}
                        onChange={() => pick(x.id)} aria-labelledby={`${id}-n-${x.id}`} aria-describedby={`${id}-p-${x.id}`} />
                      <span>
                        <span id={`${id}-n-${x.id}`} class="provider-name">{x.name}</span>
                        <span id={`${id}-p-${x.id}`} class="provider-blurb">{x.blurb}</span>
                      </span>
                    </label>
                  ))}
                </div>
              </fieldset>
              <Field label="Source name" required maxLength={100} value={f.name} placeholder="e.g. github"
                onInput={(e) => set('name', e.currentTarget.value)} hint="Records carry it as _source." />
              {f.provider === 'other' && (
                <div class="field">
                  <label for={id + '-auth'}>How the sender proves itself</label>
                  <select id={id + '-auth'} value={f.other} onChange={(e) => setF({ ...f, other: e.currentTarget.value as OtherAuth, secret: '' })}>
                    <option value="api_key">The source's API key (Authorization: Bearer)</option>
                    <option value="hmac">An HMAC signature in a header</option>
                    <option value="basic">HTTP Basic (user and password)</option>
                    <option value="url_token">A token in the URL (for senders that can set nothing else)</option>
                  </select>
                </div>
              )}
              {scheme === 'hmac' && (
                <div class="grid-fields">
                  <Field label="Signature header" required value={f.header} placeholder="X-Signature"
                    onInput={(e) => set('header', e.currentTarget.value)} />
                  <Field label="Signature prefix" value={f.prefix} placeholder="e.g. sha256="
                    onInput={(e) => set('prefix', e.currentTarget.value)} hint="Text before the digest, if any." />
                  <div class="field">
                    <label for={id + '-alg'}>Algorithm</label>
                    <select id={id + '-alg'} value={f.algorithm} onChange={(e) => set('algorithm', e.currentTarget.value)}>
                      <option value="sha256">HMAC-SHA256</option>
                      <option value="sha512">HMAC-SHA512</option>
                      <option value="sha1">HMAC-SHA1</option>
                    </select>
                  </div>
                  <div class="field">
                    <label for={id + '-enc'}>Encoding</label>
                    <select id={id + '-enc'} value={f.encoding} onChange={(e) => set('encoding', e.currentTarget.value)}>
                      <option value="hex">hex</option>
                      <option value="base64">base64</option>
                    </select>
                  </div>
                  <Field label="Shared secret" value={f.secret} autoComplete="off" spellcheck={false} class="mono"
                    onInput={(e) => set('secret', e.currentTarget.value)} hint="Empty: one is generated and shown once." />
                </div>
              )}
              {scheme === 'basic' && (
                <Field label="Username" required value={f.username} autoComplete="off" placeholder="alertmanager"
                  onInput={(e) => set('username', e.currentTarget.value)}
                  hint="The password is generated and shown once, when you create the source." />
              )}
              {p.issued && (
                <Field label={`${p.issued.label} (optional now)`} value={f.secret} autoComplete="off" spellcheck={false} class="mono"
                  placeholder={p.issued.placeholder} onInput={(e) => set('secret', e.currentTarget.value)}
                  hint={<>{p.issued.hint} {p.name} issues it; if it shows it only once it has the URL, create the source
                    first and paste it back then. Until it is set, every call is refused.</>} />
              )}
              {(scheme === 'github' || scheme === 'url_token') && (
                <p class="hint gen-note">
                  {scheme === 'github' ? 'The webhook secret' : 'The URL token'} is generated when you create the source and
                  shown once, with what to paste where.
                </p>
              )}
              {p.preset ? (
                <p class="hint preset-note">
                  The {p.name} preset sets each event's type, time, text, labels and delivery id from the payload
                  {p.id === 'alertmanager' || p.id === 'grafana' ? ', one event per alert' : ''}.
                </p>
              ) : (
                <details class="mapping" open={f.provider === 'other' && f.other === 'api_key'}>
                  <summary>Mapping: event type, text, time and labels from the payload</summary>
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
                </details>
              )}
              <ErrorMessage error={creating.error} />
              <button type="submit" class="btn btn-primary" disabled={busy || !f.name.trim() || (scheme === 'basic' && !f.username.trim())}>
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
              <select id={id + '-against'} value={against} onChange={(e) => chooseAgainst(e.currentTarget.value)}>
                {writable && <option value="form">The new source's settings (unsaved)</option>}
                {(sources ?? []).map((s) => (
                  <option key={s.id} value={s.id}>Source {s.name}</option>
                ))}
              </select>
            </div>
            <div class="field">
              <label for={id + '-payload'}>Sample payload (JSON)</label>
              <textarea id={id + '-payload'} class="mono" rows={9} spellcheck={false} value={payload}
                onInput={(e) => setPayload(e.currentTarget.value)} />
            </div>
            <div class="field">
              <label for={id + '-headers'}>Request headers (optional)</label>
              <textarea id={id + '-headers'} class="mono" rows={3} spellcheck={false} value={headers}
                placeholder="X-Hub-Signature-256: sha256=…" aria-describedby={id + '-headers-hint'}
                onInput={(e) => setHeaders(e.currentTarget.value)} />
              <p id={id + '-headers-hint'} class="hint">
                One “Name: value” a line, as the sender sent them (a delivery’s headers in GitHub’s or Stripe’s log);
                with a signature header, the test says whether it checks out.
              </p>
            </div>
            {testsURLToken && (
              <Field label="URL token (optional)" class="mono" value={urlToken} autoComplete="off" spellcheck={false}
                onInput={(e) => setUrlToken(e.currentTarget.value)}
                hint="The last part of the URL the sender posts to: the test says whether it is this source's token." />
            )}
            <button type="submit" class="btn" disabled={!writable && against === 'form'}>
              Test the mapping
            </button>
          </form>
          <ErrorMessage error={testError} />
          {testResult && <TestResult result={testResult} />}
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
              <th scope="col">Sender</th>
              <th scope="col">Event type</th>
              <th scope="col">Ingest URL</th>
              <th scope="col">Checked by</th>
              <th scope="col">Created</th>
              {writable && <th scope="col"><span class="sr-only">Actions</span></th>}
            </tr>
          </thead>
          <tbody>
            {sources.map((s) => {
              const sp = provider(providerOf(s.preset, s.verification?.scheme));
              const v = s.verification;
              return (
                <tr key={s.id}>
                  <td>
                    {s.name}
                    {s.labels && Object.keys(s.labels).length > 0 && (
                      <div class="muted small">labels: {Object.keys(s.labels).join(', ')}</div>
                    )}
                  </td>
                  <td>{sp.id === 'other' ? <span class="muted">custom</span> : sp.name}</td>
                  <td class="mono">
                    {s.preset ? <span class="muted">from the {sp.name} payload</span>
                      : s.event_type_field ? `${s.event_type_field} (else ${s.event_type})` : s.event_type}
                  </td>
                  <td class="url-cell">
                    <span class="mono">{s.ingest_url}</span> <CopyButton text={s.ingest_url} label={`Copy the ingest URL of ${s.name}`} />
                    {v?.scheme === 'url_token' && <div class="muted small">+ the token shown once</div>}
                  </td>
                  <td>
                    {v ? (
                      <>
                        {schemeName(v.scheme)}
                        {v.username && <div class="muted small">user {v.username}</div>}
                        {issuedByProvider(v.scheme) && !(v.secret_set || s.secret_set) && (
                          <div class="small warn-text">no secret yet: calls are refused</div>
                        )}
                      </>
                    ) : s.api_key_prefix ? (
                      <span class="mono">{s.api_key_prefix}…</span>
                    ) : (
                      <span class="muted">key revoked</span>
                    )}
                  </td>
                  <td><When at={s.created_at} /></td>
                  {writable && (
                    <td class="row-actions">
                      {v && (
                        <button type="button" class="btn btn-small" aria-label={`Rotate the secret of ${s.name}`}
                          onClick={() => (rotation.setError(null), setNewSecret(''), setRotating(s))}>
                          Rotate secret
                        </button>
                      )}
                      <button type="button" class="btn btn-small btn-danger-quiet" aria-label={`Delete source ${s.name}`}
                        onClick={() => deleting.ask(s)}>
                        Delete
                      </button>
                    </td>
                  )}
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <ConfirmDialog {...deleting.dialog} busy={busy} title={`Delete source “${deleting.item?.name ?? ''}”?`}
        confirmLabel="Delete source">
        <p>Its ingest URL and key stop working within a second. Events already stored stay.</p>
      </ConfirmDialog>
      <ConfirmDialog open={rotating !== null} busy={rotation.busy} error={rotation.error}
        title={`Rotate the secret of “${rotating?.name ?? ''}”?`} confirmLabel="Rotate secret"
        disabled={issuedByProvider(rotating?.verification?.scheme) && !newSecret.trim()}
        onConfirm={rotate} onCancel={() => setRotating(null)}>
        {issuedByProvider(rotating?.verification?.scheme) ? (
          <>
            <p>
              Roll the secret in {provider(providerOf(rotating?.preset, rotating?.verification?.scheme)).name} first, then
              paste the new one here. Calls signed with the old one are refused within a second.
            </p>
            <Field label="New signing secret" required class="mono" autoComplete="off" spellcheck={false} value={newSecret}
              onInput={(e) => setNewSecret(e.currentTarget.value)} />
          </>
        ) : (
          <p>
            A new {rotating?.verification?.scheme === 'basic' ? 'password' : rotating?.verification?.scheme === 'url_token' ? 'URL token' : 'secret'}{' '}
            is made and shown once. The old one stops working within a second, so paste the new one into the sender
            right away; until then its calls are refused.
          </p>
        )}
      </ConfirmDialog>
    </>
  );
}

function TestResult({ result }: { result: SourceTest }) {
  const events = result.events && result.events.length > 0
    ? result.events
    : [{ envelope: result.envelope, event_type: result.event_type, warnings: result.warnings }];
  const warnings = events.flatMap((e) => e.warnings ?? []);
  const v = result.verification;
  return (
    <div class="test-result" aria-live="polite">
      {v && (
        <p class={`test-outcome ${v.ok ? 'test-ok' : 'test-bad'}`} role="status" aria-label="Verification">
          {v.ok ? <><strong>✓ Verified:</strong> the receiver would accept this request.</>
            : <><strong>✗ Not verified:</strong> {v.message}</>}
        </p>
      )}
      {warnings.length === 0 ? (
        <p class="test-outcome test-ok"><strong>✓ The mapping is complete</strong> for this payload.</p>
      ) : (
        <div class="alert alert-warn" role="status">
          <strong>{warnings.length === 1 ? '1 warning' : `${warnings.length} warnings`}:</strong>
          <ul aria-label="Warnings">
            {warnings.map((w, i) => <li key={i}>{w}</li>)}
          </ul>
        </div>
      )}
      {events.length === 1 ? (
        <>
          <p class="small">The event it would store (type <code>{events[0].event_type}</code>):</p>
          <pre class="code" aria-label="The event the source would store">{JSON.stringify(events[0].envelope, null, 2)}</pre>
        </>
      ) : (
        <>
          <p class="small" role="status">It would store {events.length} events:</p>
          <ol class="test-events" aria-label="Events the source would store">
            {events.map((e, i) => (
              <li key={i}>
                <details open={i === 0}>
                  <summary>
                    <code>{e.event_type}</code> {textOf(e.envelope)}
                  </summary>
                  <pre class="code" aria-label={`Event ${i + 1} of ${events.length}`}>{JSON.stringify(e.envelope, null, 2)}</pre>
                </details>
              </li>
            ))}
          </ol>
        </>
      )}
    </div>
  );
}

function textOf(envelope: unknown): string {
  const t = (envelope as Record<string, unknown> | null)?.text;
  return typeof t === 'string' ? t : '';
}

/** "Password" → "password", but "URL token" stays as it is. */
function lower(label: string): string {
  return /^[A-Z]{2}/.test(label) ? label : label[0].toLowerCase() + label.slice(1);
}
