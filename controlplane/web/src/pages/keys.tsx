import { useState } from 'preact/hooks';
import { api, canWrite, type Key, type KeyScope, type Project } from '../api';
import { useAction, useConfirmRemoval, useLoad } from '../hooks';
import { RemovableTable } from '../removal';
import { CopyButton, ErrorMessage, Field, LoadStatus, PageHeader, When } from '../ui';

/** The curl line that sends a first event with the key. */
export function firstEventCurl(receiverURL: string, key: string): string {
  return (
    `curl -X POST '${receiverURL}/v1/events' \\\n` +
    `  -H 'X-API-Key: ${key}' \\\n` +
    `  -H 'Content-Type: application/json' \\\n` +
    `  -d '{"message": "hello from curl", "level": "info"}'`
  );
}

/** What each scope lets a key do, as the page says it. */
const scopeWords: Record<KeyScope, string> = {
  ingest: 'Send events and OTLP',
  results: 'Post agent results',
  read: 'Read stored events and deliveries',
};
const allScopes: KeyScope[] = ['ingest', 'results', 'read'];

/** A project key's scopes; a key made before scopes may do all three. */
function scopesOf(k: Key): KeyScope[] {
  return k.scopes ?? allScopes;
}

export function KeysPage({ project, receiverURL }: { project: Project; receiverURL: string }) {
  const base = `/projects/${encodeURIComponent(project.id)}/keys`;
  const list = useLoad(() => api<{ keys: Key[] }>('GET', base).then((r) => r.keys), [project.id]);
  const keys = list.data;
  const [name, setName] = useState('');
  // A new key sends and posts results; reading what everyone sent is chosen explicitly.
  const [scopes, setScopes] = useState<KeyScope[]>(['ingest', 'results']);
  const creating = useAction();
  const narrowing = useAction();
  const [created, setCreated] = useState<Key | null>(null);
  const revoking = useConfirmRemoval(
    (k: Key) => api('DELETE', `${base}/${encodeURIComponent(k.id)}`),
    (k) => {
      if (created?.id === k.id) setCreated(null);
      return list.reload();
    },
  );
  // One busy for the page, as before the hooks: no create while a revoke runs and back.
  const busy = creating.busy || revoking.busy || narrowing.busy;
  const writable = canWrite(project.role);

  const create = (e: Event) => {
    e.preventDefault();
    creating.run(async () => {
      const k = await api<Key>('POST', base, { name, scopes });
      setCreated(k);
      setName('');
      setScopes(['ingest', 'results']);
      await list.reload();
    });
  };

  // One click takes read away from a key, which keeps sending and posting results.
  const removeRead = (k: Key) =>
    narrowing.run(async () => {
      await api<Key>('PATCH', `${base}/${encodeURIComponent(k.id)}`, { scopes: scopesOf(k).filter((s) => s !== 'read') });
      await list.reload();
    });
  const toggle = (s: KeyScope, on: boolean) =>
    setScopes((cur) => allScopes.filter((x) => (x === s ? on : cur.includes(x))));

  return (
    <>
      <PageHeader title="API keys" project={project.name} />
      <p class="lede">
        A key sends events, OTLP logs, traces and metrics, and agent results to this project, and, with the read scope,
        reads what was stored. Send it as the <code>X-API-Key</code> header.
      </p>
      {created?.key && (
        <section class="panel panel-once" aria-labelledby="key-once">
          <h2 id="key-once">Your new key “{created.name}”</h2>
          <p>
            <strong>Copy it now: it is shown only once.</strong> The list below keeps only its prefix.
          </p>
          <div class="copy-row">
            <label class="sr-only" for="new-key">
              New API key
            </label>
            <input id="new-key" class="mono" readOnly value={created.key} onFocus={(e) => e.currentTarget.select()} />
            <CopyButton text={created.key} label="Copy the API key" />
          </div>
          <p>Send a first event:</p>
          <div class="copy-row copy-row-top">
            <pre class="code" aria-label="curl command to send a first event">
              {firstEventCurl(receiverURL, created.key)}
            </pre>
            <CopyButton text={firstEventCurl(receiverURL, created.key)} label="Copy the curl command" />
          </div>
          <button type="button" class="btn" onClick={() => setCreated(null)}>
            I have saved the key
          </button>
        </section>
      )}
      {!writable && <p class="muted">Only the project's owner and admins create and revoke keys.</p>}
      {writable && (
        <section aria-labelledby="new-key-h" class="panel">
          <h2 id="new-key-h">New key</h2>
          <form class="inline-form" onSubmit={create}>
            <Field label="Key name" name="name" required maxLength={100} value={name} placeholder="e.g. production"
              onInput={(e) => setName(e.currentTarget.value)} />
            <fieldset class="check-row">
              <legend>What the key may do</legend>
              {allScopes.map((s) => (
                <label key={s} class="check">
                  <input type="checkbox" name="scopes" value={s} checked={scopes.includes(s)}
                    onChange={(e) => toggle(s, e.currentTarget.checked)} />
                  {scopeWords[s]}
                </label>
              ))}
            </fieldset>
            <button type="submit" class="btn btn-primary" disabled={busy || !name.trim() || scopes.length === 0}>
              Create key
            </button>
          </form>
          <p class="hint">
            The key built into a sending application needs only the first two: a key that can read sees every event anyone
            sent to this project.
          </p>
          <ErrorMessage error={creating.error} />
        </section>
      )}
      <ErrorMessage error={narrowing.error} />
      <LoadStatus load={list} what="keys" />
      {keys && keys.length === 0 && <p class="empty">No keys yet.{writable && ' Create one above.'}</p>}
      <RemovableTable caption={`API keys of ${project.name}`} columns={['Name', 'Prefix', 'May', 'Created', 'Last used']}
        items={keys} id={(k) => k.id} removal={revoking} busy={busy} withActions={writable}
        cells={(k) => (
          <>
            <td>
              {k.name}
              {k.source_id && <span class="badge badge-quiet">push source</span>}
            </td>
            <td class="mono">{k.prefix}…</td>
            <td>
              {k.source_id ? (
                'Post to its source'
              ) : (
                <>
                  {scopesOf(k).map((s) => scopeWords[s]).join(', ')}
                  {writable && scopesOf(k).includes('read') && scopesOf(k).length > 1 && (
                    <button type="button" class="btn btn-small" disabled={busy} aria-label={`Remove read from key ${k.name}`}
                      onClick={() => removeRead(k)}>
                      Remove read
                    </button>
                  )}
                </>
              )}
            </td>
            <td>
              <When at={k.created_at} />
            </td>
            <td>
              <When at={k.last_used_at} />
            </td>
          </>
        )}
        action={(k) => ({ label: `Revoke key ${k.name}` })}
        confirm={(k) => ({
          title: `Revoke key “${k.name}”?`,
          confirmLabel: 'Revoke key',
          body: (
            <>
              Anything sending with <span class="mono">{k.prefix}…</span> is refused within a second. This cannot be undone.
            </>
          ),
        })}
      />
    </>
  );
}
