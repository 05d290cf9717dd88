import { useState } from 'preact/hooks';
import { api, type Project } from '../api';
import { useAction, useLoad } from '../hooks';
import { Link, navigate } from '../router';
import { ErrorMessage, Field, LoadStatus, Notice, PageHeader, When } from '../ui';

export function ProjectsPage() {
  const list = useLoad(() => api<{ projects: Project[] }>('GET', '/projects').then((r) => r.projects), []);
  const projects = list.data;
  const [name, setName] = useState('');
  // On success the page is left at once, so busy going back to false is never seen.
  const creating = useAction();

  const create = (e: Event) => {
    e.preventDefault();
    creating.run(async () => {
      const p = await api<Project>('POST', '/projects', { name });
      navigate(`/projects/${encodeURIComponent(p.id)}/keys`);
    });
  };

  return (
    <>
      <PageHeader title="Projects" />
      {new URLSearchParams(location.search).get('sso_notice') === 'claimed' && (
        <Notice>
          This account was signed up with your address before anyone proved it was theirs, and
          single sign-on has now made it yours: its password, sessions, tokens and the API keys
          of the projects it owned were ended. Review each project's keys, destinations and
          agent address before you use it.
        </Notice>
      )}
      <section aria-labelledby="new-project" class="panel">
        <h2 id="new-project">New project</h2>
        <form class="inline-form" onSubmit={create}>
          <Field label="Project name" name="name" required maxLength={100} value={name}
            onInput={(e) => setName(e.currentTarget.value)} placeholder="e.g. checkout-prod" />
          <button type="submit" class="btn btn-primary" disabled={creating.busy || !name.trim()}>
            {creating.busy ? 'Creating…' : 'Create project'}
          </button>
        </form>
        <ErrorMessage error={creating.error} />
      </section>
      <LoadStatus load={list} what="projects" />
      {projects && projects.length === 0 && <p class="empty">No projects yet. Create one above to get an API key.</p>}
      {projects && projects.length > 0 && (
        <table>
          <caption class="sr-only">Your projects</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">ID</th>
              <th scope="col">Your role</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {projects.map((p) => (
              <tr key={p.id}>
                <td>
                  <Link href={`/projects/${encodeURIComponent(p.id)}/keys`}>{p.name}</Link>
                </td>
                <td class="mono">{p.id}</td>
                <td>
                  <span class="badge">{p.role}</span>
                </td>
                <td>
                  <When at={p.created_at} never="" />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
