import './styles.css';
import type { ComponentChildren } from 'preact';
import { render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, onUnauthorized, setCsrfToken, type Project, type Session } from './api';
import { AccessPage } from './pages/access';
import { AuditPage } from './pages/audit';
import { AuthPage } from './pages/auth';
import { AuthorizePage } from './pages/authorize';
import { ForgotPasswordPage, InvitationPage, PasswordPage, ResetPasswordPage, VerifyBanner, VerifyEmailPage } from './pages/email';
import { BacklogPage } from './pages/backlog';
import { KeysPage } from './pages/keys';
import { forgetConsoleTokens } from './console';
import { DeliveriesPage } from './pages/deliveries';
import { DestinationsPage } from './pages/destinations';
import { FailedDeliveriesBadge } from './failedbadge';
import { EventsPage } from './pages/events';
import { FieldsPage } from './pages/fields';
import { IncidentPage, IncidentsPage } from './pages/incidents';
import { MembersPage } from './pages/members';
import { PipelinePage } from './pages/pipeline';
import { ProjectsPage } from './pages/projects';
import { SettingsPage } from './pages/settings';
import { SourcesPage } from './pages/sources';
import { AccountUsagePage, ProjectUsagePage } from './pages/usage';
import { RefusingBanner } from './banner';
import { currentNext, withNext } from './returnto';
import { Link, match, navigate, usePath } from './router';
import { ErrorMessage, Loading, PageHeader } from './ui';

function App() {
  const path = usePath();
  // undefined: asking the control plane; null: not logged in.
  const [session, setSession] = useState<Session | null | undefined>(undefined);

  // Set by Log out: the log-in page then does not send the next person back to this page.
  const loggedOut = useRef(false);
  const adopt = (s: Session | null) => {
    if (s) loggedOut.current = false;
    setCsrfToken(s?.csrf_token ?? '');
    setSession(s);
  };

  useEffect(() => {
    onUnauthorized(() => adopt(null));
    api<Session>('GET', '/auth/session').then(adopt, () => adopt(null));
  }, []);

  const publicPage = path === '/login' || path === '/signup';
  // The pages a mailed link opens, and asking for one: shown logged in or not.
  const linkPage = path === '/verify-email' || path === '/invitation' || path === '/reset-password' || path === '/forgot-password';
  // An MCP client's sign-in request survives logging in: the consent page is where the
  // user comes back to (and only a path on this origin is ever returned to).
  const consent = path === '/authorize';
  // So does a link into a project's page (a delivery in a chat message or a failure
  // notice: ?delivery=<id>), unless its reader logged out there.
  const deepLink = consent || (path.startsWith('/projects/') && !loggedOut.current);
  useEffect(() => {
    if (session === null && !publicPage && !linkPage) navigate(withNext('/login', deepLink ? location.pathname + location.search : null), true);
    // A single sign-on that claimed an account lands on /?sso_notice=claimed: the notice
    // goes along to the projects page, which says what the claim ended.
    const notice = path === '/' ? new URLSearchParams(location.search).get('sso_notice') : null;
    if (session && (publicPage || path === '/')) navigate((publicPage && currentNext()) || (notice === 'claimed' ? '/projects?sso_notice=claimed' : '/projects'), true);
  }, [session, path]);

  if (session === undefined) return <Loading what="your session" />;
  if (path === '/verify-email') return <VerifyEmailPage session={session} />;
  if (path === '/invitation') return <InvitationPage session={session} onSession={adopt} />;
  if (path === '/reset-password') return <ResetPasswordPage />;
  if (path === '/forgot-password') return <ForgotPasswordPage />;
  if (!session) {
    if (!publicPage) return null;
    return <AuthPage key={path} mode={path === '/signup' ? 'signup' : 'login'} onSession={adopt} />;
  }

  const logout = async () => {
    loggedOut.current = true;
    try {
      await api('DELETE', '/auth/session');
    } finally {
      forgetConsoleTokens();
      adopt(null);
    }
  };

  if (consent) return <AuthorizePage session={session} onLogout={logout} />;

  // An incident's own page lives under its project's Incidents section.
  const im = match('/projects/:id/incidents/:incident', path);
  const pm = match('/projects/:id/:section', path) ?? (im ? { id: im.id, section: 'incidents' } : null);
  return (
    <Shell session={session} onLogout={logout} projectId={pm?.id}>
      {(project, setProject) => {
        if (path === '/projects') return <ProjectsPage />;
        if (path === '/usage') return <AccountUsagePage />;
        if (path === '/account/access') return <AccessPage />;
        if (path === '/account/password') return <PasswordPage onSession={adopt} />;
        if (pm && project) {
          if (im) return <IncidentPage key={im.incident} project={project} incidentId={im.incident} />;
          if (pm.section === 'incidents') return <IncidentsPage key={project.id} project={project} />;
          if (pm.section === 'events') return <EventsPage key={project.id} project={project} />;
          if (pm.section === 'fields') return <FieldsPage key={project.id} project={project} />;
          if (pm.section === 'deliveries') return <DeliveriesPage key={project.id} project={project} />;
          if (pm.section === 'pipeline') return <PipelinePage project={project} />;
          if (pm.section === 'backlog') return <BacklogPage project={project} />;
          if (pm.section === 'destinations') return <DestinationsPage project={project} />;
          if (pm.section === 'sources') return <SourcesPage project={project} />;
          if (pm.section === 'keys') return <KeysPage project={project} receiverURL={session.receiver_url} />;
          if (pm.section === 'members') return <MembersPage project={project} session={session} />;
          if (pm.section === 'usage') return <ProjectUsagePage project={project} />;
          if (pm.section === 'settings') return <SettingsPage project={project} onChange={setProject} />;
          if (pm.section === 'audit') return <AuditPage project={project} />;
        }
        if (pm && !project) return null; // the shell shows the project's loading or not-found state
        return <NotFound />;
      }}
    </Shell>
  );
}

const sections = [
  { slug: 'events', label: 'Recent events' },
  { slug: 'incidents', label: 'Incidents' },
  { slug: 'fields', label: 'Fields' },
  { slug: 'pipeline', label: 'Pipeline' },
  { slug: 'destinations', label: 'Destinations' },
  { slug: 'deliveries', label: 'Deliveries' },
  { slug: 'sources', label: 'Push sources' },
  { slug: 'keys', label: 'API keys' },
  { slug: 'members', label: 'Members' },
  { slug: 'usage', label: 'Usage' },
  { slug: 'settings', label: 'Settings' },
  { slug: 'audit', label: 'Audit log', admins: true },
];

/** The frame: top bar, left navigation (the project's sections when in one), and main. */
function Shell(props: {
  session: Session;
  onLogout: () => void;
  projectId?: string;
  children: (project: Project | null, setProject: (p: Project) => void) => ComponentChildren;
}) {
  const path = usePath();
  const [project, setProject] = useState<Project | null>(null);
  const [projectError, setProjectError] = useState<unknown>(null);

  useEffect(() => {
    setProject(null);
    setProjectError(null);
    if (!props.projectId) return;
    api<Project>('GET', `/projects/${encodeURIComponent(props.projectId)}`).then(setProject, setProjectError);
  }, [props.projectId]);

  let body: ComponentChildren;
  if (props.projectId && projectError) {
    body = projectError instanceof ApiError && projectError.status === 404 ? <NotFound project /> : <ErrorMessage error={projectError} />;
  } else if (props.projectId && !project) {
    body = <Loading what="the project" />;
  } else {
    body = props.children(project, setProject);
  }

  // After a navigation inside the app, focus goes to the new page (as after a page load),
  // so keyboard and screen-reader users start at its content, not at the link they left.
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    document.getElementById('main')?.focus();
  }, [path]);

  // A page under a section (an incident under Incidents) keeps its section marked.
  const current = (href: string, nested = false) => (path === href || (nested && path.startsWith(href + '/')) ? 'page' : undefined);
  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <Link href="/projects" class="brand">
          otelcol-svc
        </Link>
        <div class="topbar-user">
          <span class="muted" aria-label="Signed in as">
            {props.session.user.email}
          </span>
          <button type="button" class="btn btn-small" onClick={props.onLogout}>
            Log out
          </button>
        </div>
      </header>
      <nav class="sidenav" aria-label="Main">
        <ul>
          <li>
            <Link href="/projects" aria-current={current('/projects')}>
              All projects
            </Link>
          </li>
          <li>
            <Link href="/usage" aria-current={current('/usage')}>
              Account usage
            </Link>
          </li>
          <li>
            <Link href="/account/access" aria-current={current('/account/access')}>
              Access
            </Link>
          </li>
          <li>
            <Link href="/account/password" aria-current={current('/account/password')}>
              Password
            </Link>
          </li>
        </ul>
        {project && (
          <>
            <p class="nav-project" title={project.name}>
              {project.name}
            </p>
            <ul aria-label={`Project ${project.name}`}>
              {sections.filter((s) => !s.admins || project.role !== 'member').map((s) => {
                const href = `/projects/${encodeURIComponent(project.id)}/${s.slug}`;
                return (
                  <li key={s.slug}>
                    <Link href={href} aria-current={current(href, true)}>
                      {s.label}
                      {s.slug === 'deliveries' && <FailedDeliveriesBadge projectId={project.id} viewing={path === href} />}
                    </Link>
                  </li>
                );
              })}
            </ul>
          </>
        )}
      </nav>
      <main id="main" class="content" tabIndex={-1}>
        <VerifyBanner />
        {project && <RefusingBanner project={project} />}
        {body}
      </main>
    </div>
  );
}

function NotFound({ project }: { project?: boolean }) {
  return (
    <>
      <PageHeader title={project ? 'Project not found' : 'Page not found'} />
      <p>
        {project
          ? 'There is no such project, or you are not one of its members.'
          : 'Nothing lives at this address.'}{' '}
        <Link href="/projects">Go to your projects</Link>
      </p>
    </>
  );
}

render(<App />, document.getElementById('app')!);
