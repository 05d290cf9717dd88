// An MCP client's OAuth sign-in through the dashboard in a real browser, by role and label:
// the client registers and sends the person to /oauth/authorize with a PKCE challenge,
// the person logs in and sees the consent page, allows, and the client's callback gets a
// code that it exchanges for a token that works at /mcp; the Access page lists the app
// and revokes it (the token then gets 401 within a second); a personal access token is
// created there, shown once, works at /mcp and is revoked; "Not you? Log out" comes back
// to the same request after logging in; a Deny sends access_denied back. This script plays the MCP client too: its callback is a server on 127.0.0.1 that
// records what the browser brought. Run by controlplane/dashboard_oauth_e2e_test.go:
//   DASHBOARD_URL   the control plane (the page, the API, /oauth and /mcp)
//   SCREENSHOT_DIR  where each visited page is saved
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { assertAccessible, launch, password, timeout } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const shots = process.env.SCREENSHOT_DIR || 'test-output/oauth';
assert.ok(base, 'DASHBOARD_URL must be set');
const e2e = await launch({ base, shots });
const { browser, shot, newPage, signUp } = e2e;

// The client's redirect target: it keeps every query it was called with.
const callbacks = [];
const cbServer = createServer((req, res) => {
  const u = new URL(req.url, 'http://127.0.0.1');
  // The browser also asks for /favicon.ico; only the callback counts.
  if (u.pathname === '/callback') callbacks.push(u.searchParams);
  res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
  res.end('<!doctype html><title>MCP client</title><h1>Back in the MCP client</h1>');
});
await new Promise((r) => cbServer.listen(0, '127.0.0.1', r));
const cb = `http://127.0.0.1:${cbServer.address().port}/callback`;

const clientName = 'Inspector (e2e)';
const email = 'dana@example.com';

async function json(res) {
  const text = await res.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`not JSON (${res.status}): ${text.slice(0, 300)}`);
  }
}

// authorizeURL starts a sign-in as an MCP client does: a fresh PKCE verifier and state.
function authorizeURL(clientID) {
  const verifier = randomBytes(32).toString('base64url');
  const state = randomBytes(12).toString('base64url');
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: clientID,
    redirect_uri: cb,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    state,
    scope: 'mcp',
    resource: `${base}/mcp`,
  });
  return { url: `${base}/oauth/authorize?${q}`, verifier, state };
}

// mcp sends initialize and tools/list to /mcp (streamable HTTP) with the token; it answers
// the HTTP status and, when both worked, the tool names.
async function mcp(token) {
  let id = 0;
  const rpc = async (method, params) => {
    const res = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${token}`,
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        'MCP-Protocol-Version': '2025-06-18',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }),
    });
    const text = await res.text();
    if (res.status !== 200) return { status: res.status, challenge: res.headers.get('WWW-Authenticate') };
    // An SSE answer carries the JSON-RPC message on its data: line.
    const data = /^data: (.*)$/m.exec(text)?.[1] ?? text;
    const msg = JSON.parse(data);
    assert.ok(!msg.error, `${method}: ${JSON.stringify(msg.error)}`);
    return { status: 200, result: msg.result };
  };
  const init = await rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'e2e', version: '0' } });
  if (init.status !== 200) return init;
  const list = await rpc('tools/list', {});
  if (list.status !== 200) return list;
  return { status: 200, server: init.result.serverInfo?.name, tools: list.result.tools.map((t) => t.name) };
}

// refusedWithinASecond polls /mcp with the token until it is refused: revocation is
// promised within a second.
async function refusedWithinASecond(token, what) {
  const deadline = Date.now() + 1000;
  for (;;) {
    const r = await mcp(token);
    if (r.status === 401) return r;
    assert.ok(Date.now() < deadline, `${what} still works at /mcp a second after it was revoked (${r.status})`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

async function lastCallback(count) {
  const deadline = Date.now() + timeout;
  while (callbacks.length < count) {
    assert.ok(Date.now() < deadline, 'the browser never reached the client callback');
    await new Promise((r) => setTimeout(r, 50));
  }
  return callbacks[count - 1];
}

try {
  // --- 1. an account, and the log-in page's return-to only going home -------------------
  const a = await newPage();
  await signUp(a, email);
  const origin = new URL(base).origin;
  for (const hostile of ['//evil.example/', '/\\evil.example/', '/\t/evil.example/', 'https://evil.example/', 'javascript:alert(1)']) {
    await a.goto(`${base}/login?next=${encodeURIComponent(hostile)}`);
    await a.getByRole('heading', { name: 'Projects' }).waitFor();
    const u = new URL(a.url());
    assert.equal(u.origin + u.pathname, `${origin}/projects`, `next=${JSON.stringify(hostile)} must not leave the dashboard`);
  }
  await a.goto(`${base}/login?next=${encodeURIComponent('/usage')}`);
  await a.getByRole('heading', { name: 'Usage' }).waitFor();

  // --- 2. the MCP client registers (RFC 7591) -----------------------------------------
  const reg = await fetch(`${base}/oauth/register`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ client_name: clientName, redirect_uris: [cb] }),
  });
  const client = await json(reg);
  assert.equal(reg.status, 201, JSON.stringify(client));
  assert.match(client.client_id, /^ocl_/);

  // --- 3. the sign-in: log in on the way, the consent page, Allow ---------------------
  const b = await newPage();
  const allow = authorizeURL(client.client_id);
  await b.goto(allow.url);
  await b.getByRole('heading', { name: 'Log in' }).waitFor();
  await b.getByText("Log in to review an MCP client's request").waitFor();
  assert.equal(new URL(b.url()).pathname, '/login');
  await shot(b, 'login-for-consent');
  await b.getByLabel('Email').fill(email);
  await b.getByLabel('Password').fill(password);
  await b.getByRole('button', { name: 'Log in' }).click();
  const title = b.getByRole('heading', { level: 1, name: `${clientName} wants to use otelcol-svc as you` });
  await title.waitFor();
  const consentURL = new URL(b.url());
  assert.equal(consentURL.pathname, '/authorize', 'logging in came back to the consent page');
  const requestID = consentURL.searchParams.get('request');
  assert.match(requestID, /^oar_/);
  const cbHost = new URL(cb).host;
  await b.getByText(`Signed in as ${email}.`).waitFor();
  await b.getByText(cbHost, { exact: true }).waitFor();
  await b.getByText(cb, { exact: true }).waitFor();
  await b.getByText('(an app on this computer)').waitFor();
  await b.getByText(/Read and change every project you can, with your role in each, through MCP\. It never sees your password\./).waitFor();
  await b.getByText(/renewed for up to 30 days/).waitFor();
  await b.getByRole('link', { name: 'Access page' }).waitFor();
  await b.getByText(client.client_id).waitFor();
  const allowButton = b.getByRole('button', { name: 'Allow', exact: true });
  const denyButton = b.getByRole('button', { name: 'Deny', exact: true });
  await allowButton.waitFor();
  await denyButton.waitFor();
  assert.equal(await allowButton.evaluate((el) => el === document.activeElement), false, 'Allow is not pre-focused');
  assert.doesNotMatch(await denyButton.getAttribute('class'), /danger/, 'Deny is not styled as destructive');
  await assertAccessible(b, 'consent');
  await shot(b, 'consent');
  await allowButton.click();
  await b.waitForURL((u) => u.href.startsWith(`${cb}?`));
  const got = await lastCallback(1);
  assert.equal(got.get('state'), allow.state, 'the state comes back unchanged');
  assert.equal(got.get('error'), null, `no error: ${got.get('error_description')}`);
  assert.equal(got.get('iss'), base, 'the issuer is named in the redirect (RFC 9207)');
  const code = got.get('code');
  assert.match(code, /^oac_/);

  // --- 4. the client exchanges the code and calls /mcp --------------------------------
  const tokRes = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: cb, client_id: client.client_id,
      code_verifier: allow.verifier, resource: `${base}/mcp` }),
  });
  const tok = await json(tokRes);
  assert.equal(tokRes.status, 200, JSON.stringify(tok));
  assert.equal(tok.token_type, 'Bearer');
  assert.match(tok.access_token, /^oat_/);
  const works = await mcp(tok.access_token);
  assert.equal(works.status, 200, `the access token works at /mcp: ${JSON.stringify(works)}`);
  assert.ok(works.tools.includes('create_source'), `tools/list: ${works.tools}`);

  // The request was answered: opening it again says so and offers nothing to click.
  await b.goto(`${base}/authorize?request=${encodeURIComponent(requestID)}`);
  await b.getByText('This sign-in request expired or was already used. Start again from your MCP client.').waitFor();
  assert.equal(await b.getByRole('button', { name: /^(Allow|Deny)$/ }).count(), 0, 'no buttons on a used request');
  await shot(b, 'consent-used');

  // --- 5. the Access page lists the app; revoking it cuts the token off -----------------
  await b.goto(`${base}/projects`);
  await b.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Access' }).click();
  await b.getByRole('heading', { level: 1, name: 'Access' }).waitFor();
  const apps = b.getByRole('region', { name: 'Connected apps' });
  const row = apps.getByRole('row').filter({ hasText: clientName });
  await row.waitFor();
  await row.getByText(client.client_id).waitFor();
  assert.equal(await row.getByText('never').count(), 0, 'the MCP calls above count as use');
  await assertAccessible(b, 'access');
  await shot(b, 'access-connected-app');
  await row.getByRole('button', { name: `Revoke ${clientName}` }).click();
  const dlg = b.getByRole('dialog', { name: `Disconnect “${clientName}”?` });
  await dlg.getByText('Its MCP calls are refused within a second').waitFor();
  await shot(b, 'access-revoke-confirm', false);
  await dlg.getByRole('button', { name: 'Revoke access' }).click();
  await apps.getByText('No connected apps.').waitFor();
  const refused = await refusedWithinASecond(tok.access_token, 'the revoked app');
  assert.match(refused.challenge ?? '', /^Bearer /, 'the 401 tells the client how to sign in again');

  // --- 6. a personal access token: shown once, listed by prefix, works, revoked --------
  const pats = b.getByRole('region', { name: 'Personal access tokens' });
  await pats.getByText('No personal access tokens.').waitFor();
  await pats.getByLabel('Token name').fill('laptop');
  await pats.getByLabel('Expires in (days)').fill('400');
  await pats.getByRole('button', { name: 'Create token' }).click();
  await pats.getByRole('alert').filter({ hasText: 'Enter a whole number of days from 1 to 365.' }).waitFor();
  assert.equal(await pats.getByLabel('Expires in (days)').getAttribute('aria-invalid'), 'true');
  await pats.getByLabel('Expires in (days)').fill('7');
  await pats.getByRole('button', { name: 'Create token' }).click();
  await b.getByRole('heading', { name: 'Your new token “laptop”' }).waitFor();
  const pat = await b.getByLabel('New personal access token').inputValue();
  assert.match(pat, /^osp_/);
  const config = JSON.parse(await b.getByLabel('MCP client configuration', { exact: true }).textContent());
  assert.deepEqual(config, { mcpServers: { 'otelcol-svc': { url: `${base}/mcp`, headers: { Authorization: `Bearer ${pat}` } } } });
  await b.getByRole('button', { name: 'Copy the MCP client configuration' }).click();
  assert.deepEqual(JSON.parse(await b.evaluate(() => navigator.clipboard.readText())), config, 'the copy button copies the snippet');
  await assertAccessible(b, 'access with a new token');
  await shot(b, 'access-token-once');
  assert.equal((await mcp(pat)).status, 200, 'the new token works at /mcp');
  await b.getByRole('button', { name: 'I have saved the token' }).click();
  await b.getByLabel('New personal access token').waitFor({ state: 'detached' });
  const patRow = pats.getByRole('row').filter({ hasText: 'laptop' });
  const prefix = (await patRow.locator('td.mono').textContent()).replace(/…$/, '');
  assert.ok(prefix.length >= 6 && pat.startsWith(prefix), `listed by its prefix ${prefix}`);
  assert.equal((await b.content()).includes(pat), false, 'the token is not on the page any more');
  await b.reload();
  await patRow.waitFor();
  await shot(b, 'access-token-listed');
  await patRow.getByRole('button', { name: 'Revoke token laptop' }).click();
  await b.getByRole('dialog', { name: 'Revoke token “laptop”?' }).getByRole('button', { name: 'Revoke token' }).click();
  await pats.getByText('No personal access tokens.').waitFor();
  await refusedWithinASecond(pat, 'the revoked personal access token');

  // --- 7. Deny sends access_denied back to the client ---------------------------------
  // On the way, "Not you? Log out" leads to the log-in page and back to the same request.
  const deny = authorizeURL(client.client_id);
  await b.goto(deny.url);
  const consentTitle = b.getByRole('heading', { level: 1, name: `${clientName} wants to use otelcol-svc as you` });
  await consentTitle.waitFor();
  const denyRequest = new URL(b.url()).searchParams.get('request');
  await b.getByRole('button', { name: 'Not you? Log out' }).click();
  await b.getByRole('heading', { name: 'Log in' }).waitFor();
  assert.equal(new URL(b.url()).searchParams.get('next'), `/authorize?request=${denyRequest}`);
  await b.getByLabel('Email').fill(email);
  await b.getByLabel('Password').fill(password);
  await b.getByRole('button', { name: 'Log in' }).click();
  await consentTitle.waitFor();
  assert.equal(new URL(b.url()).searchParams.get('request'), denyRequest);
  await b.getByRole('button', { name: 'Deny', exact: true }).click();
  await b.waitForURL((u) => u.href.startsWith(`${cb}?`));
  const denied = await lastCallback(2);
  assert.equal(denied.get('error'), 'access_denied');
  assert.equal(denied.get('state'), deny.state);
  assert.equal(denied.get('code'), null, 'no code after Deny');

  // --- an unknown request: the words, no buttons --------------------------------------
  await b.goto(`${base}/authorize?request=oar_unknown`);
  await b.getByText('This sign-in request expired or was already used. Start again from your MCP client.').waitFor();
  assert.equal(await b.getByRole('button', { name: /^(Allow|Deny)$/ }).count(), 0);
  await assertAccessible(b, 'expired request');
  await shot(b, 'consent-expired');

  for (const p of [a, b]) assert.deepEqual(p.cspErrors, [], 'no script errors or CSP violations');
  console.log(`oauth e2e: ok (${e2e.steps} screenshots in ${shots})`);
} finally {
  await browser.close();
  cbServer.close();
}
