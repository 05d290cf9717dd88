// The dashboard in a real browser (Debian's chromium through playwright-core), the way a
// person uses it: elements found by role and label. Run by controlplane/dashboard_e2e_test.go
// against a real control plane and receiver:
//   DASHBOARD_URL   the control plane (serves the page and the API)
//   RECEIVER_URL    the receiver the shown curl line sends to
//   SCREENSHOT_DIR  where each visited page is saved
import assert from 'node:assert/strict';
import { assertAccessible, launch, password, timeout } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const receiver = process.env.RECEIVER_URL;
const shots = process.env.SCREENSHOT_DIR || 'test-output';
assert.ok(base && receiver, 'DASHBOARD_URL and RECEIVER_URL must be set');
const e2e = await launch({ base, shots });
const { browser, shot, newPage } = e2e;
const signUp = (page, email) => e2e.signUp(page, email, { fromLogin: true });

// sendEvent posts one event with the key; waitForKey retries while the data plane does not
// know the key yet (it learns it within a second).
async function sendEvent(key, waitForKey = false) {
  let status = 0;
  for (let i = 0; i < (waitForKey ? 50 : 1); i++) {
    const res = await fetch(`${receiver}/v1/events`, {
      method: 'POST',
      headers: { 'X-API-Key': key, 'Content-Type': 'application/json' },
      body: JSON.stringify({ message: 'hello from curl', level: 'info' }),
    });
    status = res.status;
    if (status !== 401) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return status;
}

// reloadUntil reloads the page until text shows (what the data plane counted reaches the
// control plane's usage API within a second or so).
async function reloadUntil(page, text) {
  const deadline = Date.now() + timeout;
  // text: what to find, a function giving a locator to find, or an async test of the page.
  const found = async () => {
    if (typeof text !== 'function') return (await page.getByText(text).count()) > 0;
    const r = await text();
    return typeof r === 'boolean' ? r : (await r.count()) > 0;
  };
  for (;;) {
    if (await found()) return;
    if (Date.now() > deadline) throw new Error(`never showed ${text}`);
    await new Promise((r) => setTimeout(r, 200));
    await page.reload();
    await page.getByRole('heading', { level: 1 }).waitFor();
  }
}

// usageNumbers reads what the Usage page shows: the banner's "n of limit events" and the
// meter's, each as written on the page.
async function usageNumbers(page) {
  const read = async (loc) => ((await loc.count()) ? (await loc.first().textContent()).replace(/\s+/g, ' ') : '');
  const banner = await read(page.locator('.alert'));
  const meter = await read(page.getByRole('region', { name: /events in / }).locator('p'));
  const used = (t) => t.match(/([\d,]+) of ([\d,]+) events/)?.slice(1, 3).join(' of ') ?? null;
  return { banner, meter, bannerUsed: used(banner), meterUsed: used(meter) };
}

// usageAgrees reloads until the banner and the meter give the same count, nothing left
// "still being counted" (records the receiver set aside and settles within a moment),
// and says so: a person must never see two counts of one month side by side.
async function usageAgrees(page) {
  await reloadUntil(page, async () => {
    const u = await usageNumbers(page);
    return u.bannerUsed !== null && u.bannerUsed === u.meterUsed && !/still being counted/.test(u.banner + u.meter);
  });
  const u = await usageNumbers(page);
  assert.equal(u.bannerUsed, u.meterUsed, `the banner (${u.banner}) and the meter (${u.meter}) agree`);
  return u;
}

async function expectAlert(page, text) {
  await page.getByRole('alert').filter({ hasText: text }).waitFor();
}

try {
  // --- sign up, and the errors in words --------------------------------------------
  const a = await newPage();
  await a.goto(base + '/');
  await a.waitForURL('**/login');
  await assertAccessible(a, 'log in');
  await shot(a, 'login');
  await signUp(a, 'alice@example.com');
  await assertAccessible(a, 'projects');
  await shot(a, 'projects-empty');
  const cookies = await a.context().cookies();
  const session = cookies.find((c) => c.name.endsWith('svc_session'));
  assert.ok(session && session.httpOnly && session.sameSite === 'Strict', 'an HttpOnly, SameSite=Strict session cookie');
  assert.equal(await a.evaluate(() => document.cookie), '', 'the page script sees no cookie');

  const other = await newPage();
  await other.goto(base + '/signup');
  await other.getByLabel('Email').fill('alice@example.com');
  await other.getByLabel('Password').fill(password);
  await other.getByRole('button', { name: 'Sign up' }).click();
  await expectAlert(other, 'An account with this email exists');
  await other.getByRole('link', { name: 'Log in with this email instead' }).waitFor();
  await shot(other, 'signup-taken');

  await other.goto(base + '/login');
  await other.getByLabel('Email').fill('alice@example.com');
  await other.getByLabel('Password').fill('not the password');
  await other.getByRole('button', { name: 'Log in' }).click();
  await expectAlert(other, 'Wrong email or password.');
  await shot(other, 'login-wrong-password');

  // Ten failures lock this account from this address; the page says how long.
  await other.getByLabel('Email').fill('locked@example.com');
  for (let i = 0; i < 11; i++) {
    const answered = other.waitForResponse((r) => r.url().endsWith('/api/v1/auth/session') && r.request().method() === 'POST');
    await other.getByRole('button', { name: 'Log in' }).click();
    await answered;
  }
  await expectAlert(other, /Too many failed logins.*Try again in \d+ minutes?\./);
  await shot(other, 'login-rate-limited');

  // --- projects and keys ------------------------------------------------------------
  await a.getByLabel('Project name').fill('shop');
  await a.getByRole('button', { name: 'Create project' }).click();
  await a.getByRole('heading', { name: 'API keys' }).waitFor();
  const projectURL = new URL(a.url());
  const projectID = projectURL.pathname.split('/')[2];
  assert.match(projectID, /^p_/);
  await a.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API keys' }).waitFor();
  await assertAccessible(a, 'keys');
  await shot(a, 'keys-empty');

  await a.getByLabel('Key name').fill('production');
  await a.getByRole('button', { name: 'Create key' }).click();
  await a.getByRole('heading', { name: /Your new key/ }).waitFor();
  const key = await a.getByLabel('New API key').inputValue();
  assert.match(key, /^osk_/);
  const curl = await a.getByLabel('curl command to send a first event').textContent();
  assert.ok(curl.includes(`${receiver}/v1/events`) && curl.includes(key), `the curl line sends to the receiver with the key: ${curl}`);
  await a.getByRole('button', { name: 'Copy the API key' }).click();
  await a.getByRole('button', { name: 'Copy the API key' }).filter({ hasText: 'Copied' }).waitFor();
  assert.equal(await a.evaluate(() => navigator.clipboard.readText()), key, 'the copy button copies the key');
  const row = a.getByRole('row').filter({ hasText: 'production' });
  const prefix = key.slice(0, 12);
  await row.getByRole('cell', { name: `${prefix}…` }).waitFor();
  await assertAccessible(a, 'key shown once');
  await shot(a, 'key-created');

  // The key works: the event the curl line sends is accepted (within a second or so,
  // once the data plane has the key).
  assert.equal(await sendEvent(key, true), 202, 'the shown key sends an event');

  // Shown once: after dismissing, and after a reload, only the prefix is on the page.
  await a.getByRole('button', { name: 'I have saved the key' }).click();
  await a.reload();
  await a.getByRole('heading', { name: 'API keys' }).waitFor();
  await a.getByRole('row').filter({ hasText: 'production' }).waitFor();
  assert.ok(!(await a.content()).includes(key), 'the key is not shown again');
  assert.ok((await a.content()).includes(prefix), 'its prefix is listed');
  await shot(a, 'keys-list');

  // Revoke: a second key goes after a confirmation.
  await a.getByLabel('Key name').fill('staging');
  await a.getByRole('button', { name: 'Create key' }).click();
  await a.getByRole('heading', { name: /Your new key “staging”/ }).waitFor();
  await a.getByRole('button', { name: 'I have saved the key' }).click();
  await a.getByRole('button', { name: 'Revoke key staging' }).click();
  const dialog = a.getByRole('dialog', { name: /Revoke key “staging”/ });
  await dialog.waitFor();
  await assertAccessible(a, 'revoke dialog');
  await shot(a, 'revoke-confirm');
  await dialog.getByRole('button', { name: 'Revoke key' }).click();
  await a.getByRole('row').filter({ hasText: 'staging' }).waitFor({ state: 'detached' });
  await a.getByRole('row').filter({ hasText: 'production' }).waitFor();

  // --- usage: the meter, the 80% and 100% banners (this deployment's limit is 10) --------
  const nav = a.getByRole('navigation', { name: 'Main' });
  await nav.getByRole('link', { name: 'Usage', exact: true }).click();
  await a.getByRole('heading', { name: 'Usage', exact: true }).waitFor();
  await reloadUntil(a, '1 of 10 events (10%)');
  for (let i = 0; i < 8; i++) assert.equal(await sendEvent(key), 202);
  await reloadUntil(a, /90% of this month's limit used/);
  await a.getByRole('status').filter({ hasText: 'Warning:' }).waitFor();
  assert.equal((await usageAgrees(a)).meterUsed, '9 of 10');
  await assertAccessible(a, 'usage');
  await shot(a, 'usage-80');
  assert.equal(await sendEvent(key), 202);
  assert.equal(await sendEvent(key), 429, 'past the limit the receiver refuses');
  await reloadUntil(a, 'Limit reached:');
  await a.getByRole('alert').filter({ hasText: 'New events are refused' }).waitFor();
  assert.equal((await usageAgrees(a)).meterUsed, '10 of 10');
  await shot(a, 'usage-100');
  await nav.getByRole('link', { name: 'Account usage' }).click();
  await a.getByRole('heading', { name: 'Usage', exact: true }).waitFor();
  // Each project's count settles a moment after the account's total.
  await reloadUntil(a, () => a.getByRole('row').filter({ hasText: 'shop' }).getByRole('cell', { name: '10', exact: true }));
  await a.getByRole('alert').filter({ hasText: 'Limit reached:' }).waitFor();
  await shot(a, 'usage-account');
  await a.goBack();
  await a.getByRole('heading', { name: 'Usage', exact: true }).waitFor();

  // --- another tenant ---------------------------------------------------------------
  const b = await newPage();
  await signUp(b, 'bob@example.com');
  await b.goto(`${base}/projects/${projectID}/keys`);
  await b.getByRole('heading', { name: 'Project not found' }).waitFor();
  assert.ok(!(await b.content()).includes(prefix), "no trace of the other tenant's keys");
  await shot(b, 'cross-tenant-not-found');
  const apiStatus = await b.evaluate(async (id) => (await fetch(`/api/v1/projects/${id}/keys`)).status, projectID);
  assert.equal(apiStatus, 404, "the API answers 404 for another tenant's project");
  await b.goto(`${base}/projects`);
  await b.getByText('No projects yet').waitFor();

  // --- members: invite, what a member sees, change role, remove -----------------------
  await nav.getByRole('link', { name: 'Members' }).click();
  await a.getByRole('heading', { name: 'Members' }).waitFor();
  await a.getByLabel('Email').fill('nobody@example.com');
  await a.getByRole('button', { name: 'Invite' }).click();
  await expectAlert(a, 'No account with this email; ask them to sign up first.');
  await a.getByLabel('Email').fill('bob@example.com');
  await a.getByLabel('Role', { exact: true }).selectOption('member');
  await a.getByRole('button', { name: 'Invite' }).click();
  await a.getByRole('status').filter({ hasText: 'bob@example.com is now a member of shop.' }).waitFor();
  assert.equal(await a.getByLabel('Role of bob@example.com').inputValue(), 'member');
  assert.equal(await a.getByRole('row').filter({ hasText: 'alice@example.com' }).getByRole('combobox').count(), 0,
    "the owner's role cannot change, so it offers no control");
  await assertAccessible(a, 'members');
  await shot(a, 'members-owner');

  await b.goto(`${base}/projects/${projectID}/members`);
  await b.getByRole('heading', { name: 'Members' }).waitFor();
  await b.getByRole('row').filter({ hasText: 'alice@example.com' }).waitFor();
  assert.equal(await b.getByRole('heading', { name: 'Invite someone' }).count(), 0, 'a member cannot invite');
  assert.equal(await b.getByRole('combobox').count(), 0, 'a member cannot change roles');
  assert.equal(await b.getByRole('button', { name: /^Remove / }).count(), 0, 'a member cannot remove others');
  await b.getByRole('button', { name: 'Leave this project' }).waitFor();
  await assertAccessible(b, 'members as a member');
  await shot(b, 'members-as-member');
  await b.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API keys' }).click();
  await b.getByRole('row').filter({ hasText: 'production' }).waitFor();
  assert.equal(await b.getByRole('button', { name: 'Create key' }).count(), 0, 'a member cannot create keys');
  assert.equal(await b.getByRole('button', { name: /^Revoke key/ }).count(), 0, 'a member cannot revoke keys');
  await shot(b, 'keys-as-member');
  await b.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Settings' }).click();
  await b.getByText('only the owner and admins can rename it').waitFor();
  assert.equal(await b.getByRole('button', { name: 'Delete project…' }).count(), 0, 'only the owner deletes');

  await a.getByLabel('Role of bob@example.com').selectOption('admin');
  await a.getByRole('status').filter({ hasText: 'bob@example.com is now an admin.' }).waitFor();
  await b.goto(`${base}/projects/${projectID}/keys`);
  await b.getByRole('button', { name: 'Create key' }).waitFor();
  await b.getByRole('button', { name: 'Revoke key production' }).waitFor();
  await shot(b, 'keys-as-admin');

  await a.getByRole('button', { name: 'Remove bob@example.com' }).click();
  const rm = a.getByRole('dialog', { name: 'Remove bob@example.com?' });
  await rm.getByRole('button', { name: 'Remove member' }).click();
  await a.getByRole('row').filter({ hasText: 'bob@example.com' }).waitFor({ state: 'detached' });
  await b.reload();
  await b.getByRole('heading', { name: 'Project not found' }).waitFor();

  // --- settings: rename, delete with the name typed ------------------------------------
  await nav.getByRole('link', { name: 'Settings' }).click();
  await a.getByRole('heading', { name: 'Settings' }).waitFor();
  await a.getByLabel('Project name').fill('shop-eu');
  await a.getByRole('button', { name: 'Rename' }).click();
  await a.getByRole('status').filter({ hasText: 'Renamed to “shop-eu”.' }).waitFor();
  await a.getByRole('navigation', { name: 'Main' }).getByText('shop-eu').waitFor();
  await assertAccessible(a, 'settings');
  await shot(a, 'settings-renamed');

  await a.getByRole('button', { name: 'Delete project…' }).click();
  const del = a.getByRole('dialog', { name: /Delete “shop-eu”/ });
  const confirmButton = del.getByRole('button', { name: 'Delete this project' });
  await del.getByLabel(/To confirm, type/).fill('shop');
  assert.ok(await confirmButton.isDisabled(), 'a wrong name does not delete');
  await shot(a, 'delete-confirm');
  await del.getByLabel(/To confirm, type/).fill('shop-eu');
  await confirmButton.click();
  await a.waitForURL('**/projects');
  await a.getByText('No projects yet').waitFor();

  // --- log out -------------------------------------------------------------------------
  await a.getByRole('button', { name: 'Log out' }).click();
  await a.getByRole('heading', { name: 'Log in' }).waitFor();
  await a.goto(base + '/projects');
  await a.waitForURL('**/login');
  const apiAfter = await a.evaluate(async () => (await fetch('/api/v1/me')).status);
  assert.equal(apiAfter, 401, 'logged out means the API refuses the browser');
  await shot(a, 'logged-out');

  for (const p of [a, other, b]) {
    assert.deepEqual(p.cspErrors, [], 'no script errors or CSP violations');
  }
  console.log(`dashboard e2e: ok (${e2e.steps} screenshots in ${shots})`);
} finally {
  await browser.close();
}
