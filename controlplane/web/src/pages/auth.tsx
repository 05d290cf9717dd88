import { useState } from 'preact/hooks';
import { api, ApiError, type Session } from '../api';
import { currentNext, withNext } from '../returnto';
import { Link } from '../router';
import { ErrorMessage, Field, PageHeader } from '../ui';

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
