// Single sign-on in a real browser, by role and label, through a real OpenID provider
// (the zitadel/oidc example server): the login page offers "Log in with Example SSO",
// the provider's own login form logs alice in and the dashboard shows her (a project's
// Settings show the instance's provider, never its secret, and name example.com, so carol
// joins the project at her SSO login); logging out ends that session;
// mallory, whose address is outside the allowed domains, comes back to the login page with
// the reason and is not logged in. Run by controlplane/dashboard_sso_e2e_test.go:
//   DASHBOARD_URL   the control plane (its SVC_PUBLIC_URL: the provider returns there)
//   SCREENSHOT_DIR  where each step is saved
import assert from 'node:assert/strict';
import { assertAccessible, launch } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const shots = process.env.SCREENSHOT_DIR || 'test-output/sso';
assert.ok(base, 'DASHBOARD_URL must be set');
const { browser, shot, newPage } = await launch({ base, shots });

// ssoLogin goes from the login page through the provider's form as the person would.
async function ssoLogin(page, username, pass, { screenshot = false } = {}) {
  await page.goto(base + '/login');
  await page.getByRole('heading', { name: 'Log in' }).waitFor();
  const button = page.getByRole('link', { name: 'Log in with Example SSO' });
  await button.waitFor();
  if (screenshot) {
    await assertAccessible(page, 'login with SSO');
    await shot(page, 'login-page-sso-button');
  }
  await button.click();
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(pass);
  if (screenshot) await shot(page, 'provider-login-form');
  await page.getByRole('button', { name: 'Login' }).click();
}

try {
  // --- alice logs in through the provider ----------------------------------------------
  const a = await newPage();
  await ssoLogin(a, 'alice', 'alice-password', { screenshot: true });
  await a.getByRole('heading', { name: 'Projects' }).waitFor();
  await a.getByText('alice@example.com').first().waitFor();
  assert.equal(new URL(a.url()).origin, new URL(base).origin, 'the login comes back to the dashboard');
  assert.doesNotMatch(a.url(), /code=|state=/, 'the code and state do not stay in the address bar');
  const me = await a.evaluate(async () => (await (await fetch('/api/v1/me')).json()).email);
  assert.equal(me, 'alice@example.com', 'the session is alice');
  await shot(a, 'dashboard-after-sso');

  // A project's Settings show the instance's provider, read-only and without the secret.
  await a.getByLabel('Project name').fill('shop');
  await a.getByRole('button', { name: 'Create project' }).click();
  await a.getByRole('heading', { name: 'API keys' }).waitFor();
  await a.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Settings' }).click();
  const panel = a.getByRole('region', { name: 'Single sign-on' });
  await panel.getByText('example.com', { exact: true }).waitFor();
  await panel.getByText('Example SSO').waitFor();
  assert.doesNotMatch(await panel.innerText(), /secret/i, 'the client secret is not shown');
  // People of example.com join the project when they log in by SSO.
  await panel.getByLabel('Email domains that join this project').fill('other.org');
  await panel.getByRole('button', { name: 'Save domains' }).click();
  await panel.getByRole('alert').filter({ hasText: 'other.org cannot log in by single sign-on here' }).waitFor();
  await panel.getByLabel('Email domains that join this project').fill('Example.com');
  await panel.getByRole('button', { name: 'Save domains' }).click();
  await panel.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
  assert.equal(await panel.getByLabel('Email domains that join this project').inputValue(), 'example.com');
  await assertAccessible(a, 'settings');
  await shot(a, 'settings-sso-panel');

  const c = await newPage();
  await ssoLogin(c, 'carol', 'carol-password');
  await c.getByRole('heading', { name: 'Projects' }).waitFor();
  await c.getByRole('link', { name: 'shop' }).first().waitFor();
  await shot(c, 'carol-joined-by-domain');

  // An SSO session is an ordinary session: logging out ends it.
  await a.getByRole('button', { name: 'Log out' }).click();
  await a.getByRole('heading', { name: 'Log in' }).waitFor();
  assert.equal(await a.evaluate(async () => (await fetch('/api/v1/me')).status), 401);

  // --- mallory is outside the allowed domains ------------------------------------------
  const m = await newPage();
  await ssoLogin(m, 'mallory', 'mallory-password');
  await m.getByRole('heading', { name: 'Log in' }).waitFor();
  const alert = m.getByRole('alert').filter({ hasText: 'Single sign-on refused' });
  await alert.waitFor();
  assert.match(await alert.innerText(), /email domain is not allowed on this instance/);
  assert.equal(await m.evaluate(async () => (await fetch('/api/v1/me')).status), 401, 'mallory is not logged in');
  await assertAccessible(m, 'login refused');
  await shot(m, 'login-refused-domain');

  for (const p of [a, c, m]) assert.deepEqual(p.cspErrors, [], 'no script or CSP errors');
  console.log(`sso: ok (${shots})`);
} finally {
  await browser.close();
}
