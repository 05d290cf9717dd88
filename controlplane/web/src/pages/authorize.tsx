import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, type OAuthRequest, type Session } from '../api';
import { ErrorMessage, Loading, When } from '../ui';

// The consent screen of the OAuth sign-in that MCP clients start at /oauth/authorize: the
// control plane checked the client and its redirect address, and the person decides here.
// Everything the client chose (its name, its address) is shown as the client's claim, in
// plain text isolated from the sentence around it (<bdi>: a name with right-to-left
// override characters cannot reorder our words), and nothing is pre-focused, so that a
// stray Enter never allows an app.

const loopback = /^(localhost|127(\.\d{1,3}){3}|\[::1\])(:\d+)?$/i;

type Phase = 'loading' | 'ready' | 'gone' | 'leaving';

export function AuthorizePage({ session, onLogout }: { session: Session; onLogout: () => void }) {
  const id = new URLSearchParams(location.search).get('request') ?? '';
  const [req, setReq] = useState<OAuthRequest | null>(null);
  const [phase, setPhase] = useState<Phase>('loading');
  const [loadError, setLoadError] = useState<unknown>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState<'approve' | 'deny' | null>(null);
  const [decision, setDecision] = useState<'approve' | 'deny' | null>(null);

  useEffect(() => {
    document.title = 'Authorize an MCP client · otelcol-svc';
    if (!id) {
      setPhase('gone');
      return;
    }
    api<OAuthRequest>('GET', `/oauth/requests/${encodeURIComponent(id)}`).then(
      (r) => (setReq(r), setPhase('ready')),
      (err) => {
        if (err instanceof ApiError && err.status === 404) setPhase('gone');
        else setLoadError(err);
      },
    );
  }, [id]);

  const decide = async (what: 'approve' | 'deny') => {
    setBusy(what);
    setError(null);
    try {
      const r = await api<{ redirect_to: string }>('POST', `/oauth/requests/${encodeURIComponent(id)}/${what}`);
      // The control plane only registers http(s) addresses; a javascript: or data: address
      // here would run in this origin, so it is refused whatever the answer says.
      const to = new URL(r.redirect_to, location.href);
      if (to.protocol !== 'https:' && to.protocol !== 'http:') {
        throw new Error('The control plane answered an address that is not a web address; nothing was sent to the app.');
      }
      setDecision(what);
      setPhase('leaving');
      location.assign(to.href);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) setPhase('gone');
      else setError(err);
      setBusy(null);
    }
  };

  let body;
  if (phase === 'gone') {
    body = (
      <>
        <h1>This sign-in request can no longer be used</h1>
        <div class="alert alert-warn" role="alert">
          <strong>Expired:</strong> This sign-in request expired or was already used. Start again from your MCP client.
        </div>
        <p class="muted small">A request is valid for 10 minutes and can be answered once.</p>
      </>
    );
  } else if (loadError) {
    body = (
      <>
        <h1>Could not load the sign-in request</h1>
        <ErrorMessage error={loadError} />
        <button type="button" class="btn" onClick={() => location.reload()}>
          Try again
        </button>
      </>
    );
  } else if (!req) {
    body = <Loading what="the sign-in request" />;
  } else {
    const local = loopback.test(req.redirect_host);
    body = (
      <>
        <h1 class="consent-title">
          <bdi class="consent-client">{req.client_name}</bdi> wants to use otelcol-svc as you
        </h1>
        <p class="consent-who">
          Signed in as <strong>{session.user.email}</strong>.{' '}
          <button type="button" class="link-btn" onClick={onLogout} disabled={phase === 'leaving'}>
            Not you? Log out
          </button>
        </p>
        <section class="consent-item" aria-labelledby="c-can">
          <h2 id="c-can">What it can do</h2>
          <p>
            Read and change every project you can, with your role in each, through MCP. It never sees your password.
          </p>
        </section>
        <section class="consent-item" aria-labelledby="c-long">
          <h2 id="c-long">For how long</h2>
          <p>
            Its access is renewed for up to 30 days at a time, until you revoke it on the{' '}
            <a href="/account/access" target="_blank" rel="noopener">
              Access page<span class="sr-only"> (opens in a new tab)</span>
            </a>
            .
          </p>
        </section>
        <section class="consent-item" aria-labelledby="c-back">
          <h2 id="c-back">Where it sends you back</h2>
          <p>
            <strong class="mono consent-host">{req.redirect_host}</strong>
            {local && <span class="muted"> (an app on this computer)</span>}
          </p>
          <p class="small muted consent-uri">
            <span class="sr-only">Full address: </span>
            <span class="mono">{req.redirect_uri}</span>
          </p>
        </section>
        <p class="consent-note small">
          <strong>Check it is yours:</strong> the name “<bdi>{req.client_name}</bdi>” is the app's own; otelcol-svc has not verified
          it. Allow only if you just started signing in from an MCP client you trust.
        </p>
        <ErrorMessage error={error} />
        {phase === 'leaving' ? (
          <p class="alert alert-info" role="status">
            {decision === 'approve' ? 'Allowed.' : 'Denied.'} Taking you back to {req.redirect_host}…
          </p>
        ) : (
          <div class="consent-actions">
            <button type="button" class="btn" disabled={!!busy} onClick={() => decide('deny')}>
              {busy === 'deny' ? 'Denying…' : 'Deny'}
            </button>
            <button type="button" class="btn btn-primary" disabled={!!busy} onClick={() => decide('approve')}>
              {busy === 'approve' ? 'Allowing…' : 'Allow'}
            </button>
          </div>
        )}
        <p class="small muted consent-meta">
          Client ID <span class="mono">{req.client_id}</span> · this request expires <When at={req.expires_at} />
        </p>
      </>
    );
  }

  return (
    <div class="consent-page">
      <header class="topbar">
        <span class="brand">otelcol-svc</span>
        <span class="muted">MCP sign-in</span>
      </header>
      <main id="main" class="consent">
        <div class="consent-card">{body}</div>
      </main>
    </div>
  );
}
