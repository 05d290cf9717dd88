import { useState } from 'preact/hooks';
import { api, canWrite, type Project } from '../api';
import { useAction, useConfirmRemoval } from '../hooks';
import { navigate } from '../router';
import { ConfirmDialog, ErrorMessage, Field, Notice, PageHeader } from '../ui';

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
