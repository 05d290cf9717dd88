import { useEffect, useState } from 'preact/hooks';
import { api, canWrite, type Project } from '../api';
import { useAction, useConfirmRemoval } from '../hooks';
import { navigate } from '../router';
import { ConfirmDialog, ErrorMessage, Field, Notice, PageHeader } from '../ui';

type SSOProvider = {
  enabled: boolean;
  name?: string;
  issuer?: string;
  client_id?: string;
  allowed_domains?: string[];
  redirect_uri?: string;
};

/** The instance's single sign-on provider. The control plane has no instance
 * administrator, so it is the operator's setting (SVC_OIDC_*), shown here read-only; the
 * client secret is never shown. */
function SSOPanel({ project }: { project: Project }) {
  const [p, setP] = useState<SSOProvider | null>(null);
  const [domains, setDomains] = useState('');
  const [saved, setSaved] = useState(false);
  const saving = useAction();
  const path = `/projects/${encodeURIComponent(project.id)}/sso-domains`;
  useEffect(() => {
    api<SSOProvider>('GET', '/sso').then(setP, () => setP(null));
  }, []);
  useEffect(() => {
    if (p?.enabled) api<{ domains: string[] }>('GET', path).then((r) => setDomains(r.domains.join(', ')), () => {});
  }, [p?.enabled, path]);
  if (!p) return null;
  const save = (e: Event) => {
    e.preventDefault();
    setSaved(false);
    saving.run(async () => {
      const list = domains.split(',').map((d) => d.trim()).filter(Boolean);
      const r = await api<{ domains: string[] }>('PUT', path, { domains: list });
      setDomains(r.domains.join(', '));
      setSaved(true);
    });
  };
  return (
    <section class="panel" aria-labelledby="sso-h">
      <h2 id="sso-h">Single sign-on</h2>
      {p.enabled ? (
        <table>
          <tbody>
            {(
              [
                ['Provider', p.name, false],
                ['Issuer', p.issuer, true],
                ['Client ID', p.client_id, true],
                ['Allowed email domains', p.allowed_domains?.length ? p.allowed_domains.join(', ') : 'any', false],
                ['Redirect URI to register', p.redirect_uri, true],
              ] as const
            ).map(([k, v, mono]) => (
              <tr key={k}>
                <th scope="row">{k}</th>
                <td class={mono ? 'mono' : undefined}>{v}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p>Single sign-on is off on this instance.</p>
      )}
      {p.enabled &&
        (canWrite(project.role) ? (
          <form onSubmit={save}>
            <Field label="Email domains that join this project" name="sso_domains" value={domains} autoComplete="off"
              placeholder="e.g. example.com" hint="Comma-separated. People of these domains who log in by single sign-on join this project as members. You can add only the domain of your own verified address, and only when the instance lists its allowed domains."
              onInput={(e) => (setDomains(e.currentTarget.value), setSaved(false))} />
            <button type="submit" class="btn btn-primary" disabled={saving.busy}>
              Save domains
            </button>
            <ErrorMessage error={saving.error} />
            {saved && <Notice>Saved.</Notice>}
          </form>
        ) : (
          <p>Email domains that join this project: {domains || 'none'}</p>
        ))}
      <p class="muted">
        The provider is the same for the whole instance and is set by its operator with the SVC_OIDC_* environment
        variables.
      </p>
    </section>
  );
}

export function SettingsPage({ project, onChange }: { project: Project; onChange: (p: Project) => void }) {
  const path = `/projects/${encodeURIComponent(project.id)}`;
  const [name, setName] = useState(project.name);
  const [saved, setSaved] = useState(false);
  const renaming = useAction();
  const [confirmName, setConfirmName] = useState('');
  // On success the page is left for /projects, so the dialog closing is never seen.
  const deleting = useConfirmRemoval(
    () => api('DELETE', path),
    () => navigate('/projects'),
  );
  const busy = renaming.busy || deleting.busy;

  const rename = (e: Event) => {
    e.preventDefault();
    setSaved(false);
    renaming.run(async () => {
      const p = await api<typeof project>('PATCH', path, { name });
      onChange({ ...project, ...p });
      setSaved(true);
    });
  };

  return (
    <>
      <PageHeader title="Settings" project={project.name} />
      <section class="panel" aria-labelledby="rename-h">
        <h2 id="rename-h">Name</h2>
        {canWrite(project.role) ? (
          <form class="inline-form" onSubmit={rename}>
            <Field label="Project name" name="name" required maxLength={100} value={name}
              onInput={(e) => (setName(e.currentTarget.value), setSaved(false))} />
            <button type="submit" class="btn btn-primary" disabled={busy || !name.trim() || name === project.name}>
              Rename
            </button>
          </form>
        ) : (
          <p>
            {project.name} <span class="muted">(only the owner and admins can rename it)</span>
          </p>
        )}
        <ErrorMessage error={renaming.error} />
        {saved && <Notice>Renamed to “{project.name}”.</Notice>}
        <p class="muted">
          Project ID <span class="mono">{project.id}</span>
        </p>
      </section>
      <SSOPanel project={project} />
      {project.role === 'owner' && (
        <section class="panel panel-danger" aria-labelledby="delete-h">
          <h2 id="delete-h">Delete project</h2>
          <p>
            Deleting removes the project, its keys, pipeline, destinations and stored events for everyone. Senders using
            its keys are refused.
          </p>
          <button type="button" class="btn btn-danger" onClick={() => (setConfirmName(''), deleting.ask(project))}>
            Delete project…
          </button>
        </section>
      )}
      <ConfirmDialog {...deleting.dialog} busy={busy} title={`Delete “${project.name}”?`} confirmLabel="Delete this project"
        disabled={confirmName !== project.name}>
        <p>This cannot be undone.</p>
        <Field label={`To confirm, type “${project.name}”`} name="confirm" autoComplete="off"
          value={confirmName} onInput={(e) => setConfirmName(e.currentTarget.value)} />
      </ConfirmDialog>
    </>
  );
}
