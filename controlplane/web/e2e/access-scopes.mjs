// Scoped keys and logging out everywhere, by role and label:
// a new key's form offers the three scopes with read unchecked; a key created without read
// is refused console reads (403 insufficient_scope); one created with read reads until
// "Remove read" narrows it in place; a read-only personal access token is marked so; and
// "Log out everywhere" ends this browser's session and the account's tokens. Run by
// controlplane/dashboard_access_e2e_test.go (TestScopedKeysAndLogOutEverywhereInTheBrowser):
//   DASHBOARD_URL   the control plane
//   RECEIVER_URL    the collector
//   SCREENSHOT_DIR  where each visited page is saved
import assert from 'node:assert/strict';
import { assertAccessible, launch } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const receiver = process.env.RECEIVER_URL;
const shots = process.env.SCREENSHOT_DIR || 'test-output/access-scopes';
assert.ok(base && receiver, 'DASHBOARD_URL and RECEIVER_URL must be set');
const { browser, shot, signUp, newPage } = await launch({ base, shots });

// consoleRead reads the project's events with a key, waiting out the moment a new key
// takes to reach the receiver (401 until then), and answers the status and error code.
async function consoleRead(project, key, want) {
  const by = Date.now() + 10_000;
  for (;;) {
    const res = await fetch(`${receiver}/console/v1/projects/${project}/events`, { headers: { 'X-API-Key': key } });
    const body = await res.json().catch(() => ({}));
    if (res.status === want || Date.now() > by) return { status: res.status, code: body?.error?.code, message: body?.error?.message };
    await new Promise((r) => setTimeout(r, 50));
  }
}

try {
  const a = await newPage();
  await signUp(a, 'kim@example.com');
  await a.getByLabel('Project name').fill('scoped');
  await a.getByRole('button', { name: 'Create project' }).click();
  await a.getByRole('heading', { name: 'API keys' }).waitFor();
  const project = new URL(a.url()).pathname.split('/')[2];

  const scopes = a.getByRole('group', { name: 'What the key may do' });
  assert.equal(await scopes.getByRole('checkbox', { name: 'Send events and OTLP' }).isChecked(), true);
  assert.equal(await scopes.getByRole('checkbox', { name: 'Post agent results' }).isChecked(), true);
  assert.equal(await scopes.getByRole('checkbox', { name: 'Read stored events and deliveries' }).isChecked(), false,
    'read is chosen explicitly');
  await assertAccessible(a, 'keys');
  await shot(a, 'new-key-form');

  // A key with the defaults sends but does not read.
  await a.getByLabel('Key name').fill('app');
  await a.getByRole('button', { name: 'Create key' }).click();
  const appKey = await a.getByLabel('New API key').inputValue();
  await a.getByRole('button', { name: 'I have saved the key' }).click();
  const appRow = a.getByRole('row').filter({ hasText: 'app' });
  await appRow.getByRole('cell', { name: 'Send events and OTLP, Post agent results' }).waitFor();
  assert.equal(await appRow.getByRole('button', { name: /Remove read/ }).count(), 0);
  const refused = await consoleRead(project, appKey, 403);
  assert.equal(refused.status, 403, 'a key without read cannot read');
  assert.equal(refused.code, 'insufficient_scope');
  assert.match(refused.message, /needs the read scope/);

  // A key given read reads, until one click narrows it.
  await a.getByLabel('Key name').fill('reader');
  await scopes.getByRole('checkbox', { name: 'Read stored events and deliveries' }).check();
  await a.getByRole('button', { name: 'Create key' }).click();
  const readerKey = await a.getByLabel('New API key').inputValue();
  await a.getByRole('button', { name: 'I have saved the key' }).click();
  assert.equal((await consoleRead(project, readerKey, 200)).status, 200, 'a key with read reads');
  await shot(a, 'keys-with-read');
  await a.getByRole('button', { name: 'Remove read from key reader' }).click();
  const readerRow = a.getByRole('row').filter({ hasText: 'reader' });
  await readerRow.getByRole('cell', { name: 'Send events and OTLP, Post agent results' }).waitFor();
  const narrowed = await consoleRead(project, readerKey, 403);
  assert.equal(narrowed.status, 403, 'the narrowed key stops reading');
  assert.equal(narrowed.code, 'insufficient_scope');
  await shot(a, 'key-narrowed');

  // A read-only personal access token is marked so.
  await a.getByRole('link', { name: 'Access' }).click();
  await a.getByRole('heading', { name: 'Personal access tokens' }).waitFor();
  await a.getByLabel('Token name').fill('dashboards');
  await a.getByRole('checkbox', { name: 'Read-only' }).check();
  const opens = a.getByRole('group', { name: 'Projects it opens' });
  await opens.getByRole('radio', { name: 'Only some' }).check();
  assert.equal(await a.getByRole('button', { name: 'Create token' }).isDisabled(), true, 'no project chosen yet');
  await opens.getByRole('checkbox', { name: 'scoped' }).check();
  await assertAccessible(a, 'limited token form');
  await shot(a, 'limited-token-form');
  await a.getByRole('button', { name: 'Create token' }).click();
  const token = await a.getByLabel('New personal access token').inputValue();
  await a.getByRole('button', { name: 'I have saved the token' }).click();
  const tokenRow = a.getByRole('row').filter({ hasText: 'dashboards' });
  await tokenRow.getByText('read-only').waitFor();
  await tokenRow.getByText('only scoped').waitFor();
  const listed = await (await fetch(`${base}/api/v1/projects`, { headers: { Authorization: `Bearer ${token}` } })).json();
  assert.deepEqual(listed.projects.map((p) => p.id), [project], 'the limited token sees its project');
  const change = await fetch(`${base}/api/v1/projects/${project}`, {
    method: 'PATCH', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body: '{"name":"x"}',
  });
  assert.equal(change.status, 403, 'a read-only token changes nothing');
  await assertAccessible(a, 'access');
  await shot(a, 'access-read-only-token');

  // Log out everywhere: this browser lands on the log-in page, and the token is refused.
  await a.getByRole('button', { name: 'Log out everywhere…' }).click();
  const dialog = a.getByRole('dialog', { name: 'Log out everywhere?' });
  await shot(a, 'log-out-everywhere-dialog', false);
  await dialog.getByRole('button', { name: 'Log out everywhere' }).click();
  await a.getByRole('heading', { name: 'Log in' }).waitFor();
  const me = await fetch(`${base}/api/v1/me`, { headers: { Authorization: `Bearer ${token}` } });
  assert.equal(me.status, 401, 'the personal access token ended too');
  await a.goto(base + '/account/access');
  await a.getByRole('heading', { name: 'Log in' }).waitFor();
  await shot(a, 'logged-out');
  assert.deepEqual(a.cspErrors.filter((e) => !/401|Unauthorized/.test(e)), [], 'no script errors');
} finally {
  await browser.close();
}
