// The project's Audit log page in a real browser, by role and label. Run by
// controlplane/dashboard_audit_e2e_test.go against a real control plane:
//   DASHBOARD_URL   the control plane
//   SCREENSHOT_DIR  where each step is saved
// The owner works in the dashboard and through the API (as a script would); the log
// shows each change with who, how and when, the pipeline's and a destination's fields
// before and after, never a secret; the Action filter narrows it; a member has no Audit
// log in the navigation and is told why at its address.
import assert from 'node:assert/strict';
import { assertAccessible, launch, password } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const shots = process.env.SCREENSHOT_DIR || 'test-output/audit';
assert.ok(base, 'DASHBOARD_URL must be set');
const e2e = await launch({ base, shots });
const { browser, shot, newPage, signUp } = e2e;

async function apiCall(token, method, path, body) {
  const res = await fetch(`${base}/api/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

async function signUpAPI(email) {
  const res = await fetch(`${base}/api/v1/auth/signup`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ email, password }),
  });
  assert.equal(res.status, 201);
  return (await res.json()).token;
}

try {
  const started = Date.now();
  const a = await newPage();
  await signUp(a, 'olivia@example.com');
  await a.getByLabel('Project name').fill('shop');
  await a.getByRole('button', { name: 'Create project' }).click();
  await a.getByRole('heading', { name: 'API keys' }).waitFor();
  const projectID = a.url().split('/')[4];

  const owner = (await (await fetch(`${base}/api/v1/auth/login`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ email: 'olivia@example.com', password }),
  })).json()).token;
  const admin = await signUpAPI('adam@example.com');
  await signUpAPI('mia@example.com');
  const gone = await signUpAPI('gus@example.com');
  const p = `/projects/${projectID}`;
  await apiCall(owner, 'POST', `${p}/members`, { email: 'adam@example.com', role: 'admin' });
  await apiCall(owner, 'POST', `${p}/members`, { email: 'mia@example.com', role: 'member' });
  const gus = await apiCall(owner, 'POST', `${p}/members`, { email: 'gus@example.com', role: 'member' });
  assert.ok(gone);
  await apiCall(admin, 'PUT', `${p}/pipeline`, { trigger: 'event["status"] == "failed"', batch_size: 20 });
  const secret = (await apiCall(owner, 'POST', `${p}/pipeline/rotate-secret`)).signing_secret;
  const sink = await apiCall(owner, 'POST', `${p}/sinks`, { kind: 'webhook', url: 'https://hooks.example.com/services/T1/B2/sink-path-secret',
    headers: { Authorization: 'Bearer sink-header-secret' } });
  await apiCall(owner, 'PATCH', `${p}/sinks/${sink.id}`, { enabled: false, headers: { Authorization: 'Bearer sink-header-secret-2' } });
  await apiCall(admin, 'DELETE', `${p}/members/${gus.user_id}`);

  // --- the owner reads the log ---------------------------------------------------------
  const nav = a.getByRole('navigation', { name: 'Main' });
  await nav.getByRole('link', { name: 'Audit log' }).click();
  await a.getByRole('heading', { name: 'Audit log', level: 1 }).waitFor();
  const log = a.getByRole('table', { name: 'Audit log' });
  await log.waitFor();
  const rows = log.getByRole('row');
  // A header, the key the dashboard made, project, 3 members added, pipeline, secret, sink x2, removal.
  await a.getByRole('status').filter({ hasText: /^10 records$/ }).waitFor();
  assert.equal(await rows.count(), 11);
  const removal = rows.filter({ hasText: 'Removed a member' });
  assert.match(await removal.textContent(), /adam@example\.com/, 'who removed them');
  assert.match(await removal.textContent(), /login token from 127\.0\.0\.1/, 'with which credential, from where');
  // When: within this run (a run across midnight UTC has two dates).
  const when = Date.parse(await removal.locator('time').getAttribute('datetime'));
  assert.ok(when >= started - 1000 && when <= Date.now(), `when: ${new Date(when).toISOString()}`);
  const pipeline = rows.filter({ hasText: 'Changed the pipeline' });
  const changes = pipeline.getByRole('definition');
  // A change's value, by its field's name (the term labels it).
  const field = (row, name) => row.getByLabel(name, { exact: true });
  assert.equal(await field(pipeline, 'trigger').getByRole('insertion').textContent(), 'event["status"] == "failed"', 'the trigger after');
  assert.ok(await changes.count() >= 2, 'trigger and batch_size');
  const sinkRow = rows.filter({ hasText: 'Changed a destination' });
  assert.equal(await field(sinkRow, 'enabled').getByRole('deletion').textContent(), 'true');
  assert.equal(await field(sinkRow, 'headers').getByRole('insertion').textContent(), '[redacted] (changed)');
  // A new destination lists what was chosen, not its id or start time.
  const added = rows.filter({ hasText: 'Added a destination' });
  assert.equal(await field(added, 'kind').getByRole('insertion').textContent(), 'webhook');
  for (const noise of ['id', 'since']) assert.equal(await added.getByRole('term').filter({ hasText: new RegExp(`^${noise}$`) }).count(), 0, noise);
  const text = await a.locator('main').textContent();
  for (const s of [secret, 'sink-header-secret', 'sink-path-secret']) assert.ok(!text.includes(s), `no secret on the page: ${s}`);
  await assertAccessible(a, 'audit log');
  await shot(a, 'audit-log');

  // --- the Action filter ----------------------------------------------------------------
  await a.getByLabel('Action').selectOption({ label: 'Destinations' });
  await a.getByRole('status').filter({ hasText: /^2 records$/ }).waitFor();
  const destRows = log.getByRole('row');
  assert.equal(await destRows.count(), 3, 'a header and two records');
  assert.match(await destRows.nth(1).textContent(), /Changed a destination/, 'newest first');
  assert.match(await destRows.nth(2).textContent(), /Added a destination/);
  await shot(a, 'audit-log-destinations');
  await a.getByLabel('Action').selectOption({ label: 'Members' });
  await a.getByRole('status').filter({ hasText: /^4 records$/ }).waitFor();
  const exportLink = a.getByRole('link', { name: 'Export JSON lines' });
  assert.match(await exportLink.getAttribute('href'), /format=jsonl&action=member$/);

  // --- a member is not offered it ---------------------------------------
  const m = await newPage();
  await m.goto(`${base}/login`);
  await m.getByLabel('Email').fill('mia@example.com');
  await m.getByLabel('Password').fill(password);
  await m.getByRole('button', { name: 'Log in' }).click();
  await m.getByRole('heading', { name: 'Projects' }).waitFor();
  await m.goto(`${base}/projects/${projectID}/members`);
  await m.getByRole('heading', { name: 'Members', level: 1 }).waitFor();
  assert.equal(await m.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Audit log' }).count(), 0, 'a member has no Audit log');
  await m.goto(`${base}/projects/${projectID}/audit`);
  await m.getByText("Only the project's owner and admins can read its audit log.").waitFor();
  assert.equal(await m.getByRole('table', { name: 'Audit log' }).count(), 0);
  await shot(m, 'audit-log-member');

  for (const page of [a, m]) assert.deepEqual(page.cspErrors, [], 'no script errors');
  console.log(`audit: ok (${e2e.steps} screenshots in ${shots})`);
} finally {
  await browser.close();
}
