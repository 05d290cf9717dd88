// The project's audit log (owners and admins): who changed what, with which credential,
// from where and when, newest first, filtered by kind of action, with each configuration
// change's fields before and after (secrets only ever as "[redacted]"), and an export as
// JSON lines.
import { useEffect, useState } from 'preact/hooks';
import { api, canWrite, type Project } from '../api';
import { FilterSelect } from '../filters';
import { Moment } from '../time';
import { ErrorMessage, Loading, PageHeader } from '../ui';

export interface AuditEvent {
  at: string;
  actor: { id: string; email: string };
  credential: { kind: string; id?: string } | null;
  action: string;
  target: string;
  from: string;
  changes: Record<string, { from?: unknown; to?: unknown }>;
}

interface AuditPage {
  events: AuditEvent[];
  next_before?: string;
}

/** The filter's choices: an action's first word matches all of its kind. */
const kinds: [string, string][] = [
  ['', 'All actions'],
  ['pipeline', 'Pipeline'],
  ['sink', 'Destinations'],
  ['source', 'Push sources'],
  ['key', 'API keys'],
  ['member', 'Members'],
  ['invitation', 'Invitations'],
  ['project', 'Project'],
  ['deadletter', 'Replays'],
  ['backlog', 'Backlogs'],
  ['console', 'Data reads'],
  ['audit', 'Audit exports'],
];

const credentialNames: Record<string, string> = {
  session: 'dashboard session',
  login_token: 'login token',
  personal_access_token: 'personal access token',
  oauth_grant: 'connected app (OAuth)',
  console_token: 'console token',
  project_key: 'project key',
};

/** What an action did, in words. */
export function actionLabel(a: string): string {
  const words: Record<string, string> = {
    'pipeline.update': 'Changed the pipeline',
    'pipeline.restore': 'Restored a pipeline version',
    'pipeline.secret.rotate': 'Rotated the signing secret',
    'sink.create': 'Added a destination',
    'sink.update': 'Changed a destination',
    'sink.delete': 'Removed a destination',
    'source.create': 'Added a push source',
    'source.delete': 'Removed a push source',
    'source.secret.rotate': "Rotated a push source's secret",
    'key.create': 'Created an API key',
    'key.scopes': "Changed an API key's scopes",
    'key.revoke': 'Revoked an API key',
    'member.add': 'Added a member',
    'member.role': "Changed a member's role",
    'member.remove': 'Removed a member',
    'invitation.create': 'Invited someone',
    'invitation.revoke': 'Revoked an invitation',
    'invitation.accept': 'Accepted an invitation',
    'project.create': 'Created the project',
    'project.settings': "Changed the project's settings",
    'project.sso_domains': 'Changed the single sign-on join domains',
    'project.delete': 'Deleted the project',
    'member.join_sso': 'Joined by single sign-on',
    'deadletter.replay': 'Replayed dead letters',
    'backlog.start': 'Sent a backlog to the agent',
    'console.token': "Got a token to read the project's data",
    'audit.export': 'Exported the audit log',
    'key.read': "Read the project's data (console, at a receiver)",
    'incident.acknowledge': 'Acknowledged an incident',
    'incident.resolve': 'Resolved an incident',
    'incident.mute': 'Muted an incident',
    'incident.reinvestigate': 'Asked the agent to investigate an incident again',
    'account.create': 'Signed up',
    'account.sso_create': 'Signed up by single sign-on',
    'account.sso_claim': 'Claimed the account by single sign-on',
    'login.sso': 'Logged in by single sign-on',
    'logout_all': 'Logged out everywhere',
    'email.verify': 'Confirmed the email address',
    'password.change': 'Changed the password',
    'password.reset': 'Reset the password by email',
    'token.create': 'Created a personal access token',
    'token.revoke': 'Revoked a personal access token',
    'oauth_grant.create': 'Connected an app (OAuth)',
    'oauth_grant.revoke': 'Disconnected an app (OAuth)',
    'oauth_token.revoke': "Revoked an app's token (OAuth)",
  };
  return words[a] ?? a;
}

function show(v: unknown): string {
  if (v === undefined) return '';
  if (typeof v === 'string') return v === '' ? '""' : v;
  return JSON.stringify(v);
}

/** A record's changes: one line per field, what it was struck out, what it became; each
 * value is labelled by its field's name (the term), so it can be found by it. */
function Changes({ changes, label, id }: { changes: AuditEvent['changes']; label: string; id: string }) {
  const fields = Object.keys(changes ?? {});
  if (fields.length === 0) return <span class="muted">—</span>;
  return (
    <dl class="audit-changes" aria-label={label}>
      {fields.map((f, i) => {
        const c = changes[f];
        return (
          <div key={f}>
            <dt id={`${id}-${i}`}>{f}</dt>
            <dd aria-labelledby={`${id}-${i}`}>
              {'from' in c && <del class="diff-del">{show(c.from)}</del>}
              {'from' in c && 'to' in c && <span aria-hidden="true"> → </span>}
              {'to' in c && <ins class="diff-add">{show(c.to)}</ins>}
            </dd>
          </div>
        );
      })}
    </dl>
  );
}

export function AuditPage({ project }: { project: Project }) {
  const base = `/projects/${encodeURIComponent(project.id)}/audit`;
  const [kind, setKind] = useState('');
  const [page, setPage] = useState<AuditPage | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [more, setMore] = useState(false);
  const allowed = canWrite(project.role);

  useEffect(() => {
    if (!allowed) return;
    setPage(null);
    setError(null);
    api<AuditPage>('GET', `${base}?limit=50${kind ? `&action=${kind}` : ''}`).then(setPage, setError);
  }, [project.id, kind]);

  const loadMore = async () => {
    if (!page?.next_before) return;
    setMore(true);
    try {
      const next = await api<AuditPage>('GET', `${base}?limit=50&before=${encodeURIComponent(page.next_before)}${kind ? `&action=${kind}` : ''}`);
      setPage({ events: [...page.events, ...next.events], next_before: next.next_before });
    } catch (err) {
      setError(err);
    } finally {
      setMore(false);
    }
  };

  if (!allowed) {
    return (
      <>
        <PageHeader title="Audit log" project={project.name} />
        <p class="empty">Only the project's owner and admins can read its audit log.</p>
      </>
    );
  }
  return (
    <>
      <PageHeader title="Audit log" project={project.name}>
        <a class="btn" href={`/api/v1${base}?format=jsonl${kind ? `&action=${kind}` : ''}`} download={`audit-${project.id}.jsonl`}>
          Export JSON lines
        </a>
      </PageHeader>
      <p class="hint audit-hint">
        Every change to this project, who made it with which credential, from which address and when; and every token handed out
        to read its data. Secrets are never shown, only that they changed.
      </p>
      <div class="filters">
        <FilterSelect label="Action" value={kind} onChange={setKind}>
          {kinds.map(([v, l]) => <option key={v} value={v}>{l}</option>)}
        </FilterSelect>
        {page && <span class="muted small" role="status">{page.events.length} record{page.events.length === 1 ? '' : 's'}{page.next_before ? ' (more older)' : ''}</span>}
      </div>
      <ErrorMessage error={error} />
      {!page && !error && <Loading what="the audit log" />}
      {page && page.events.length === 0 && <p class="empty">Nothing recorded{kind ? ' of this kind' : ''} yet.</p>}
      {page && page.events.length > 0 && (
        <table class="audit-table" aria-label="Audit log">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Who</th>
              <th scope="col">What</th>
              <th scope="col">Changes</th>
            </tr>
          </thead>
          <tbody>
            {page.events.map((e, i) => (
              <tr key={`${e.at}-${i}`}>
                <td class="audit-when"><Moment at={e.at} ms /></td>
                <td class="audit-who">
                  <span>{e.actor.email || e.actor.id || 'unknown'}</span>
                  <span class="muted small">
                    {e.credential ? credentialNames[e.credential.kind] ?? e.credential.kind : ''}
                    {e.from ? ` from ${e.from}` : ''}
                  </span>
                </td>
                <td class="audit-what">
                  <span>{actionLabel(e.action)}</span>
                  <code class="muted small">{e.action}{e.target ? ` ${e.target}` : ''}</code>
                </td>
                <td><Changes changes={e.changes} label={`Changes of ${e.action} at ${e.at}`} id={`audit-${i}`} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {page?.next_before && (
        <p>
          <button type="button" class="btn" disabled={more} onClick={loadMore}>
            {more ? 'Loading…' : 'Load older records'}
          </button>
        </p>
      )}
    </>
  );
}
