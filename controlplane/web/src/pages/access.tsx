import { useState } from 'preact/hooks';
import { api, type AccessToken, type OAuthGrant, type Project } from '../api';
import { forgetConsoleTokens } from '../console';
import { useAction, useConfirmRemoval, useLoad } from '../hooks';
import { RemovableTable } from '../removal';
import { ConfirmDialog, CopyButton, ErrorMessage, Field, LoadStatus, PageHeader, When } from '../ui';

/** The MCP client configuration that sends the token as a header (Claude, VS Code, Cursor). */
export function mcpClientConfig(origin: string, token: string): string {
  return JSON.stringify(
    { mcpServers: { 'otelcol-svc': { url: `${origin}/mcp`, headers: { Authorization: `Bearer ${token}` } } } },
    null,
    2,
  );
}

/** The account's ways in besides the password: personal access tokens and connected apps. */
export function AccessPage() {
  return (
    <>
      <PageHeader title="Access" />
      <p class="lede">
        What may act as you besides your password. Each one has your role in every project you can use (a token may be
        limited to some projects and to reading), and stops working within a second of being revoked.
      </p>
      <TokensSection />
      <AppsSection />
      <EverywhereSection />
    </>
  );
}

/** Log out everywhere: every session, login token, access token and connected app ends. */
function EverywhereSection() {
  const [asking, setAsking] = useState(false);
  const ending = useAction();
  const confirm = () =>
    ending.run(async () => {
      await api('POST', '/auth/logout-all');
      forgetConsoleTokens();
      // This browser's session ended too: the log-in page, from a fresh start.
      location.assign('/login');
    });
  return (
    <section class="panel panel-danger" aria-labelledby="everywhere-h">
      <h2 id="everywhere-h">Log out everywhere</h2>
      <p>
        Ends every way in you hold: dashboard sessions in every browser (this one too), login tokens, personal access
        tokens and connected apps, and what they opened, within a second. Use it when a device or a token may be in
        someone else's hands.
      </p>
      <button type="button" class="btn btn-danger" onClick={() => setAsking(true)}>
        Log out everywhere…
      </button>
      <ConfirmDialog open={asking} busy={ending.busy} error={ending.error} title="Log out everywhere?" confirmLabel="Log out everywhere"
        onCancel={() => setAsking(false)} onConfirm={confirm}>
        <p>Every session and token ends, and you log in again here. Tokens used by scripts must be created again.</p>
      </ConfirmDialog>
    </section>
  );
}

const maxDays = 365;

function TokensSection() {
  const list = useLoad(() => api<{ tokens: AccessToken[] }>('GET', '/tokens').then((r) => r.tokens), []);
  const tokens = list.data;
  const [name, setName] = useState('');
  const [days, setDays] = useState('30');
  const [daysError, setDaysError] = useState('');
  const [readOnly, setReadOnly] = useState(false);
  // null: every project of yours, now and later; else only these.
  const [limitTo, setLimitTo] = useState<string[] | null>(null);
  const projects = useLoad(() => api<{ projects: Project[] }>('GET', '/projects').then((r) => r.projects), []);
  const projectName = (id: string) => projects.data?.find((p) => p.id === id)?.name ?? id;
  const creating = useAction();
  const [created, setCreated] = useState<AccessToken | null>(null);
  const revoking = useConfirmRemoval(
    (t: AccessToken) => api('DELETE', `/tokens/${encodeURIComponent(t.id)}`),
    (t) => {
      if (created?.id === t.id) setCreated(null);
      return list.reload();
    },
  );
  const busy = creating.busy || revoking.busy;

  const create = (e: Event) => {
    e.preventDefault();
    creating.setError(null);
    const n = Number(days);
    if (!/^\d+$/.test(days.trim()) || n < 1 || n > maxDays) {
      setDaysError(`Enter a whole number of days from 1 to ${maxDays}.`);
      return;
    }
    setDaysError('');
    creating.run(async () => {
      const t = await api<AccessToken>('POST', '/tokens', {
        name: name.trim(), expires_in_days: n, read_only: readOnly, ...(limitTo ? { projects: limitTo } : {}),
      });
      setCreated(t);
      setName('');
      setReadOnly(false);
      setLimitTo(null);
      await list.reload();
    });
  };

  const expired = (t: AccessToken) => !!t.expires_at && new Date(t.expires_at).getTime() <= Date.now();
  const config = created?.token ? mcpClientConfig(location.origin, created.token) : '';

  return (
    <section class="panel" aria-labelledby="pat-h">
      <h2 id="pat-h">Personal access tokens</h2>
      <p class="hint">
        For scripts and for MCP clients configured with a header: send it as <code>Authorization: Bearer</code> to the API
        or to <code>{location.origin}/mcp</code>.
      </p>
      {created?.token && (
        <div class="panel panel-once" role="region" aria-labelledby="pat-once">
          <h3 id="pat-once">Your new token “{created.name}”</h3>
          <p>
            <strong>Copy it now: it is shown only once.</strong> The list below keeps only its prefix.
          </p>
          <div class="copy-row">
            <label class="sr-only" for="new-token">
              New personal access token
            </label>
            <input id="new-token" class="mono" readOnly value={created.token} onFocus={(e) => e.currentTarget.select()} />
            <CopyButton text={created.token} label="Copy the token" />
          </div>
          <p>For an MCP client that takes a JSON configuration:</p>
          <div class="copy-row copy-row-top">
            <pre class="code" aria-label="MCP client configuration">
              {config}
            </pre>
            <CopyButton text={config} label="Copy the MCP client configuration" />
          </div>
          <button type="button" class="btn" onClick={() => setCreated(null)}>
            I have saved the token
          </button>
        </div>
      )}
      <form class="inline-form" onSubmit={create} noValidate>
        <Field label="Token name" name="name" required maxLength={100} value={name} placeholder="e.g. laptop MCP client"
          onInput={(e) => setName(e.currentTarget.value)} />
        <div class="field field-narrow field-number">
          <label for="pat-days">Expires in (days)</label>
          <input id="pat-days" name="expires_in_days" type="number" inputMode="numeric" min={1} max={maxDays} step={1}
            required value={days} aria-invalid={daysError ? 'true' : undefined}
            aria-describedby={daysError ? 'pat-days-error' : 'pat-days-hint'} onInput={(e) => setDays(e.currentTarget.value)} />
        </div>
        <label class="check">
          <input type="checkbox" name="read_only" checked={readOnly} onChange={(e) => setReadOnly(e.currentTarget.checked)} />
          Read-only
        </label>
        <fieldset class="check-row">
          <legend>Projects it opens</legend>
          <label class="check">
            <input type="radio" name="pat-projects" checked={limitTo === null} onChange={() => setLimitTo(null)} />
            All of mine
          </label>
          <label class="check">
            <input type="radio" name="pat-projects" checked={limitTo !== null} onChange={() => setLimitTo([])} />
            Only some
          </label>
          {limitTo !== null &&
            projects.data?.map((p) => (
              <label key={p.id} class="check">
                <input type="checkbox" name="projects" value={p.id} checked={limitTo.includes(p.id)}
                  onChange={(e) => {
                    const on = e.currentTarget.checked;
                    setLimitTo((cur) => (cur ?? []).filter((id) => id !== p.id).concat(on ? [p.id] : []));
                  }} />
                <bdi>{p.name}</bdi>
              </label>
            ))}
        </fieldset>
        <button type="submit" class="btn btn-primary" disabled={busy || !name.trim() || (limitTo !== null && limitTo.length === 0)}>
          Create token
        </button>
      </form>
      {daysError ? (
        <p id="pat-days-error" class="problem" role="alert">
          <strong>Error:</strong> {daysError}
        </p>
      ) : (
        <p id="pat-days-hint" class="hint">
          1 to {maxDays} days. A token cannot create other tokens. A read-only token reads and changes nothing.
        </p>
      )}
      <ErrorMessage error={creating.error} />
      <LoadStatus load={list} what="tokens" />
      {tokens && tokens.length === 0 && (
        <p class="empty">
          No personal access tokens. Create one for a script, or for an MCP client that is configured with a header instead
          of signing in.
        </p>
      )}
      <RemovableTable caption="Personal access tokens" columns={['Name', 'Prefix', 'Created', 'Expires', 'Last used']}
        items={tokens} id={(t) => t.id} removal={revoking} busy={busy}
        cells={(t) => (
          <>
            <td>
              {t.name}
              {t.read_only && <span class="badge badge-quiet">read-only</span>}
              {!!t.projects?.length && (
                <span class="badge badge-quiet">only {t.projects.map(projectName).join(', ')}</span>
              )}
            </td>
            <td class="mono">{t.prefix}…</td>
            <td>
              <When at={t.created_at} />
            </td>
            <td>
              <When at={t.expires_at} />
              {expired(t) && <span class="badge badge-quiet">expired</span>}
            </td>
            <td>
              <When at={t.last_used_at} />
            </td>
          </>
        )}
        action={(t) => ({ label: `Revoke token ${t.name}` })}
        confirm={(t) => ({
          title: `Revoke token “${t.name}”?`,
          confirmLabel: 'Revoke token',
          body: (
            <>
              Scripts and MCP clients using <span class="mono">{t.prefix}…</span> are refused within a second. This cannot
              be undone.
            </>
          ),
        })}
      />
    </section>
  );
}

function AppsSection() {
  const list = useLoad(() => api<{ grants: OAuthGrant[] }>('GET', '/oauth/grants').then((r) => r.grants), []);
  const grants = list.data;
  const revoking = useConfirmRemoval(
    (g: OAuthGrant) => api('DELETE', `/oauth/grants/${encodeURIComponent(g.id)}`),
    () => list.reload(),
  );

  return (
    <section class="panel" aria-labelledby="apps-h">
      <h2 id="apps-h">Connected apps</h2>
      <p class="hint">MCP clients you allowed by signing in from them. Each acts as you through MCP until you revoke it.</p>
      <LoadStatus load={list} what="connected apps" />
      {grants && grants.length === 0 && (
        <p class="empty">
          No connected apps. Add <code>{location.origin}/mcp</code> to an MCP client (Claude, VS Code, MCP Inspector) and
          allow it when it asks: it shows here, where you can revoke it.
        </p>
      )}
      <RemovableTable caption="Connected apps" columns={['App', 'Client ID', 'Connected', 'Last used']} items={grants}
        id={(g) => g.id} removal={revoking}
        cells={(g) => (
          <>
            <td>
              <bdi>{g.client_name}</bdi>
            </td>
            <td class="mono">{g.client_id}</td>
            <td>
              <When at={g.created_at} />
            </td>
            <td>
              <When at={g.last_used_at} />
            </td>
          </>
        )}
        action={(g) => ({ label: `Revoke ${g.client_name}` })}
        confirm={(g) => ({
          title: `Disconnect “${g.client_name}”?`,
          confirmLabel: 'Revoke access',
          body: 'Its MCP calls are refused within a second, and it must ask you again to reconnect. The app itself is not uninstalled.',
        })}
      />
    </section>
  );
}
