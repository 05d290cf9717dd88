import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, type Session } from '../api';
import { currentNext, withNext } from '../returnto';
import { Link } from '../router';
import { ErrorMessage, Field, PageHeader } from '../ui';

/** Why a single sign-on came back to the login page (the callback's ?sso_error=): the
 * page has its own words for each code, so a link cannot put other words here. */
const ssoErrors: Record<string, (name: string) => string> = {
  domain: (n) => `Your ${n} account's email domain is not allowed on this instance. Ask an administrator to allow it, or log in with a password.`,
  unverified: (n) => `${n} does not confirm that your email address is verified, so it cannot log you in here.`,
  denied: (n) => `The login at ${n} was cancelled.`,
  subject: (n) => `The account with your email address here belongs to another ${n} identity, so it cannot log you in. Ask an administrator.`,
  expired: () => 'That single sign-on took too long or was started in another browser. Try again.',
  unavailable: (n) => `${n} cannot be reached right now. Try again later, or log in with a password.`,
  rate: () => 'Too many single sign-on attempts from your address. Try again in a few minutes.',
  failed: (n) => `The login at ${n} failed. Try again, or log in with a password.`,
};

type SSOInfo = { enabled: boolean; name?: string };

/** Log in or sign up; either sets the session cookie and answers the session. */
export function AuthPage({ mode, onSession }: { mode: 'login' | 'signup'; onSession: (s: Session) => void }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const signup = mode === 'signup';
  // Kept across the switch between log in and sign up, so that a newcomer arriving from an
  // MCP client's sign-in still comes back to it.
  const next = currentNext();
  const [sso, setSSO] = useState<SSOInfo>({ enabled: false });
  useEffect(() => {
    api<SSOInfo>('GET', '/auth/sso').then(setSSO, () => setSSO({ enabled: false }));
  }, []);
  const ssoError = new URLSearchParams(location.search).get('sso_error');
  const ssoName = sso.name || 'single sign-on';

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const s = await api<Session>('POST', signup ? '/auth/session/signup' : '/auth/session', { email, password });
      onSession(s);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  const taken = error instanceof ApiError && error.code === 'conflict';
  return (
    <main class="auth">
      <div class="auth-card">
        <p class="brand">otelcol-svc</p>
        <PageHeader title={signup ? 'Create your account' : 'Log in'} />
        {next?.startsWith('/authorize') && (
          <p class="auth-context">
            {signup ? 'Create an account' : 'Log in'} to review an MCP client's request to use otelcol-svc as you.
          </p>
        )}
        {ssoError && (
          <div class="alert alert-error" role="alert">
            <strong>Single sign-on refused:</strong> {(ssoErrors[ssoError] ?? ssoErrors.failed)(ssoName)}
          </div>
        )}
        {sso.enabled && (
          <>
            <a class="btn btn-block" href="/api/v1/auth/sso/start">
              Log in with {ssoName}
            </a>
            <p class="auth-switch muted">or with your email and password</p>
          </>
        )}
        <form onSubmit={submit} noValidate>
          <Field label="Email" type="email" name="email" autoComplete="email" required value={email}
            onInput={(e) => setEmail(e.currentTarget.value)} />
          <Field label="Password" type="password" name="password" required minLength={signup ? 8 : undefined}
            autoComplete={signup ? 'new-password' : 'current-password'} value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
            hint={signup ? 'At least 8 characters.' : undefined} />
          <ErrorMessage error={error} />
          {taken && (
            <p>
              <Link href={withNext('/login', next)}>Log in with this email instead</Link>
            </p>
          )}
          <button type="submit" class="btn btn-primary btn-block" disabled={busy}>
            {busy ? (signup ? 'Creating account…' : 'Logging in…') : signup ? 'Sign up' : 'Log in'}
          </button>
        </form>
        {!signup && (
          <p class="auth-switch">
            <Link href="/forgot-password">Forgot your password?</Link>
          </p>
        )}
        <p class="auth-switch">
          {signup ? (
            <>
              Have an account? <Link href={withNext('/login', next)}>Log in</Link>
            </>
          ) : (
            <>
              New here? <Link href={withNext('/signup', next)}>Create an account</Link>
            </>
          )}
        </p>
      </div>
    </main>
  );
}
