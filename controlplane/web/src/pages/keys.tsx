import { useState } from 'preact/hooks';
import { api, canWrite, type Key, type Project } from '../api';
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

export function KeysPage({ project, receiverURL }: { project: Project; receiverURL: string }) {
  const base = `/projects/${encodeURIComponent(project.id)}/keys`;
  const list = useLoad(() => api<{ keys: Key[] }>('GET', base).then((r) => r.keys), [project.id]);
  const keys = list.data;
  const [name, setName] = useState('');
  const creating = useAction();
  const [created, setCreated] = useState<Key | null>(null);
  const revoking = useConfirmRemoval(
    (k: Key) => api('DELETE', `${base}/${encodeURIComponent(k.id)}`),
    (k) => {
      if (created?.id === k.id) setCreated(null);
      return list.reload();
    },
  );
  // One busy for the page, as before the hooks: no create while a revoke runs and back.
  const busy = creating.busy || revoking.busy;
  const writable = canWrite(project.role);

  const create = (e: Event) => {
    e.preventDefault();
    creating.run(async () => {
      const k = await api<Key>('POST', base, { name });
      setCreated(k);
      setName('');
      await list.reload();
    });
  };

  return (
    <>
      <PageHeader title="API keys" project={project.name} />
      <p class="lede">
        A key sends events, OTLP logs, traces and metrics, and agent results to this project. Send it as the{' '}
        <code>X-API-Key</code> header.
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
            <button type="submit" class="btn btn-primary" disabled={busy || !name.trim()}>
              Create key
            </button>
          </form>
          <ErrorMessage error={creating.error} />
        </section>
      )}
      <LoadStatus load={list} what="keys" />
      {keys && keys.length === 0 && <p class="empty">No keys yet.{writable && ' Create one above.'}</p>}
      <RemovableTable caption={`API keys of ${project.name}`} columns={['Name', 'Prefix', 'Created', 'Last used']}
        items={keys} id={(k) => k.id} removal={revoking} busy={busy} withActions={writable}
        cells={(k) => (
          <>
            <td>
              {k.name}
              {k.source_id && <span class="badge badge-quiet">push source</span>}
            </td>
            <td class="mono">{k.prefix}…</td>
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
