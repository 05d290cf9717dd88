// The pages mailed links open (verify an address, accept an invitation, reset a password),
// the forgotten-password form, the password change, and the banner that asks to verify.
// A link's secret is read from ?token= once and taken out of the address bar, so it does
// not stay in the history or reach another site as a referrer.
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { api, ApiError, type Session } from '../api';
import { useAction, useLoad } from '../hooks';
import { Link, navigate } from '../router';
import { ErrorMessage, Field, Loading, Notice, PageHeader } from '../ui';

function takeToken(): string {
  const params = new URLSearchParams(location.search);
  const token = params.get('token') ?? '';
  if (token) {
    params.delete('token');
    const rest = params.toString();
    history.replaceState(null, '', location.pathname + (rest ? '?' + rest : ''));
  }
  return token;
}

/** The token of the page's link, read once per page load. */
function useLinkToken(): string {
  const [token] = useState(takeToken);
  return token;
}

function AuthCard({ title, children }: { title: string; children: ComponentChildren }) {
  return (
    <main class="auth">
      <div class="auth-card">
        <p class="brand">otelcol-svc</p>
        <PageHeader title={title} />
        {children}
      </div>
    </main>
  );
}

/**
 * /verify-email?token=…: confirms the address, logged in or not. It waits for a click:
 * mail scanners that open links and run their scripts would otherwise use the link up.
 */
export function VerifyEmailPage({ session }: { session: Session | null }) {
  const token = useLinkToken();
  const confirming = useAction();
  const [result, setResult] = useState<{ email: string; verified: boolean } | null>(null);
  const confirm = () =>
    confirming.run(async () => {
      setResult(await api<{ email: string; verified: boolean }>('POST', '/auth/verify-email', { token }));
    });
  const next = session ? '/projects' : '/login';
  return (
    <AuthCard title="Confirm your email address">
      {!token ? (
        <ErrorMessage error={new Error('This page needs the link from the email; open it from there.')} />
      ) : result?.verified ? (
        <Notice>{result.email} is confirmed. Invitations to it now reach your account.</Notice>
      ) : result ? (
        // The link was valid but the account's address changed since it was sent.
        <ErrorMessage error={new Error(`${result.email} is not confirmed: the link was for another address. Ask for a new link from the dashboard.`)} />
      ) : (
        <>
          <p class="auth-context">Confirm that this address is yours, so invitations to it reach your account.</p>
          <ErrorMessage error={confirming.error} />
          <button type="button" class="btn btn-primary btn-block" onClick={confirm} disabled={confirming.busy}>
            {confirming.busy ? 'Confirming…' : 'Confirm my address'}
          </button>
        </>
      )}
      <p class="auth-switch">
        <Link href={next}>{session ? 'Go to your projects' : 'Log in'}</Link>
      </p>
    </AuthCard>
  );
}

type InvitationInfo = {
  email: string;
  project: string;
  project_id: string;
  role: string;
  has_account: boolean;
  invited_by?: string;
};

/** /invitation?token=…: signs the invited address up (or logs it in) into the project. */
export function InvitationPage({ session, onSession }: { session: Session | null; onSession: (s: Session) => void }) {
  const token = useLinkToken();
  const info = useLoad(
    () => (token ? api<InvitationInfo>('POST', '/auth/invitation', { token }) : Promise.reject(new Error('This page needs the link from the invitation email; open it from there.'))),
    [],
  );
  const [password, setPassword] = useState('');
  const accepting = useAction();
  const inv = info.data;

  const accept = (e: Event) => {
    e.preventDefault();
    accepting.run(async () => {
      const s = await api<Session>('POST', '/auth/session/invitation/accept', { token, password });
      onSession(s);
      navigate(`/projects/${encodeURIComponent(inv!.project_id)}/events`, true);
    });
  };

  return (
    <AuthCard title="Accept the invitation">
      {!inv && !info.error && <Loading what="the invitation" />}
      <ErrorMessage error={info.error} />
      {inv && (
        <>
          <p class="auth-context">
            {inv.invited_by ? <>{inv.invited_by} invited you</> : 'You are invited'} to <strong>{inv.project}</strong> as{' '}
            {inv.role === 'admin' ? 'an admin' : 'a member'}, as <strong>{inv.email}</strong>.
          </p>
          {session && session.user.email !== inv.email && (
            <Notice>
              You are logged in as <strong>{session.user.email}</strong>. Accepting logs you out of it and in as{' '}
              <strong>{inv.email}</strong>.
            </Notice>
          )}
          <form onSubmit={accept} noValidate>
            <Field label={inv.has_account ? 'Password' : 'Choose a password'} type="password" name="password" required
              minLength={inv.has_account ? undefined : 8} autoComplete={inv.has_account ? 'current-password' : 'new-password'}
              value={password} onInput={(e) => setPassword(e.currentTarget.value)}
              hint={inv.has_account ? `The password of your account ${inv.email}.` : 'At least 8 characters. This creates your account.'} />
            <ErrorMessage error={accepting.error} />
            {inv.has_account && accepting.error instanceof ApiError && accepting.error.code === 'invalid_credentials' && (
              <p>
                <Link href="/forgot-password">Forgot your password?</Link>
              </p>
            )}
            <button type="submit" class="btn btn-primary btn-block" disabled={accepting.busy || !password}>
              {accepting.busy ? 'Joining…' : inv.has_account ? 'Log in and join' : 'Sign up and join'}
            </button>
          </form>
        </>
      )}
    </AuthCard>
  );
}

/** /forgot-password: mails a reset link; the answer is the same whether or not the address has an account. */
export function ForgotPasswordPage() {
  const [email, setEmail] = useState('');
  const [sent, setSent] = useState('');
  const sending = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    sending.run(async () => {
      await api('POST', '/auth/password-reset', { email });
      setSent(email);
    });
  };
  return (
    <AuthCard title="Reset your password">
      {sent ? (
        <Notice>
          If {sent} has an account, a link to set a new password is on its way. It works once, for 30 minutes.
        </Notice>
      ) : (
        <form onSubmit={submit} noValidate>
          <Field label="Email" type="email" name="email" autoComplete="email" required value={email}
            onInput={(e) => setEmail(e.currentTarget.value)} hint="The address of your account." />
          <ErrorMessage error={sending.error} />
          <button type="submit" class="btn btn-primary btn-block" disabled={sending.busy || !email.trim()}>
            {sending.busy ? 'Sending…' : 'Email me a link'}
          </button>
        </form>
      )}
      <p class="auth-switch">
        <Link href="/login">Back to log in</Link>
      </p>
    </AuthCard>
  );
}

/** /reset-password?token=…: sets a new password; every session of the account ends. */
export function ResetPasswordPage() {
  const token = useLinkToken();
  const [password, setPassword] = useState('');
  const [done, setDone] = useState(false);
  const saving = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    saving.run(async () => {
      await api('POST', '/auth/password-reset/confirm', { token, password });
      setDone(true);
    });
  };
  return (
    <AuthCard title="Set a new password">
      {done ? (
        <Notice>Your password is changed, and every session of your account was logged out.</Notice>
      ) : !token ? (
        <ErrorMessage error={new Error('This page needs the link from the email; open it from there.')} />
      ) : (
        <form onSubmit={submit} noValidate>
          <Field label="New password" type="password" name="password" required minLength={8} autoComplete="new-password"
            value={password} onInput={(e) => setPassword(e.currentTarget.value)}
            hint="At least 8 characters. Setting it logs you out everywhere." />
          <ErrorMessage error={saving.error} />
          {saving.error instanceof ApiError && saving.error.code === 'invalid_token' && (
            <p>
              <Link href="/forgot-password">Ask for a new link</Link>
            </p>
          )}
          <button type="submit" class="btn btn-primary btn-block" disabled={saving.busy || !password}>
            {saving.busy ? 'Saving…' : 'Set password'}
          </button>
        </form>
      )}
      <p class="auth-switch">
        <Link href="/login">Log in</Link>
      </p>
    </AuthCard>
  );
}

type EmailStatus = { email: string; verified: boolean; email_enabled: boolean };

/** /account/password: change the password (the current one is needed); other sessions end. */
export function PasswordPage({ onSession }: { onSession: (s: Session) => void }) {
  const [current, setCurrent] = useState('');
  const [password, setPassword] = useState('');
  const [done, setDone] = useState(false);
  const saving = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    setDone(false);
    saving.run(async () => {
      // The change ends every session, this one too; the answer is this browser's new one.
      const s = await api<Session>('PUT', '/me/password', { current_password: current, password });
      onSession(s);
      setCurrent('');
      setPassword('');
      setDone(true);
    });
  };
  return (
    <>
      <PageHeader title="Password" />
      <section class="panel" aria-labelledby="password-h">
        <h2 id="password-h">Change your password</h2>
        <form onSubmit={submit} noValidate>
          <Field label="Current password" type="password" name="current-password" required autoComplete="current-password"
            value={current} onInput={(e) => setCurrent(e.currentTarget.value)} />
          <Field label="New password" type="password" name="new-password" required minLength={8} autoComplete="new-password"
            value={password} onInput={(e) => setPassword(e.currentTarget.value)}
            hint="At least 8 characters. Your other sessions, login tokens and access tokens end." />
          <ErrorMessage error={saving.error} />
          {done && <Notice>Your password is changed. Every other session of your account was logged out.</Notice>}
          <button type="submit" class="btn btn-primary" disabled={saving.busy || !current || !password}>
            {saving.busy ? 'Saving…' : 'Change password'}
          </button>
        </form>
      </section>
    </>
  );
}

/** Asks an account whose address is not confirmed to confirm it, with a way to resend. */
export function VerifyBanner() {
  const status = useLoad(() => api<EmailStatus>('GET', '/me/email'), []);
  const sending = useAction();
  const [sent, setSent] = useState(false);
  const s = status.data;
  if (!s || s.verified || !s.email_enabled) return null;
  const resend = () =>
    sending.run(async () => {
      await api('POST', '/me/email/verify');
      setSent(true);
    });
  return (
    <div class="alert alert-info" role="region" aria-label="Confirm your email address">
      <strong>Confirm your email address.</strong> We sent a link to {s.email}; until you open it, invitations to this
      address cannot find your account.{' '}
      {sent ? (
        <span role="status">A new link is on its way.</span>
      ) : (
        <button type="button" class="btn btn-small" onClick={resend} disabled={sending.busy}>
          Send the link again
        </button>
      )}
      <ErrorMessage error={sending.error} />
    </div>
  );
}
