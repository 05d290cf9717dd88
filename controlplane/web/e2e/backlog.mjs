// Process stored records in a real browser, by role and label: events stored
// before the agent URL was set are sent only when asked, after a preview of how many
// records and calls it will be. Run by controlplane/dashboard_backlog_e2e_test.go
// (TestDashboardBacklogInTheBrowser):
//   DASHBOARD_URL   the control plane
//   RECEIVER_URL    the collector (every data-plane role)
//   AGENT_URL       the Go test's agent, which answers 200 and counts what it gets
//   SCREENSHOT_DIR  where each visited page is saved
import assert from 'node:assert/strict';
import { assertAccessible, launch } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const receiver = process.env.RECEIVER_URL;
const agent = process.env.AGENT_URL;
const shots = process.env.SCREENSHOT_DIR || 'test-output/backlog';
assert.ok(base && receiver && agent, 'DASHBOARD_URL, RECEIVER_URL and AGENT_URL must be set');
const { browser, shot, newPage, signUp } = await launch({ base, shots, viewport: { width: 1280, height: 860 } });

// sendBatch posts events with the key, retrying while the data plane does not know the
// key yet (it learns it within a second).
async function sendBatch(key, events) {
  for (let i = 0; ; i++) {
    const res = await fetch(receiver + '/v1/events/batch', {
      method: 'POST',
      headers: { 'X-API-Key': key, 'Content-Type': 'application/json', 'X-Event-Type': 'order.failed' },
      body: JSON.stringify(events),
    });
    if (res.status !== 401 || i >= 50) {
      assert.equal(res.status, 202, `the batch answered ${res.status}: ${await res.text()}`);
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

const agentCalls = async () => (await (await fetch(agent + '/calls')).json()).records;

const opened = [];
try {
  const a = await newPage();
  opened.push(a);
  const m = await newPage();
  opened.push(m);
  await signUp(m, 'mia@example.com');
  await signUp(a, 'oscar@example.com');
  await a.getByLabel('Project name').fill('orders');
  await a.getByRole('button', { name: 'Create project' }).click();
  await a.getByRole('heading', { name: 'API keys' }).waitFor();
  const projectID = new URL(a.url()).pathname.split('/')[2];
  const nav = a.getByRole('navigation', { name: 'Main' });
  await a.getByLabel('Key name').fill('ingest');
  await a.getByRole('button', { name: 'Create key' }).click();
  const key = await a.getByLabel('New API key').inputValue();
  await a.getByRole('button', { name: 'I have saved the key' }).click();

  // 25 events stored before the project has an agent (the URL is saved right after: the
  // pipeline starts after the last record stored when it is saved).
  await sendBatch(key, Array.from({ length: 25 }, (_, i) => ({ order: 5000 + i, status: 'failed' })));

  // --- the pipeline gets its agent: nothing stored is sent ------------------------------
  await nav.getByRole('link', { name: 'Pipeline' }).click();
  await a.getByRole('heading', { name: 'Pipeline', level: 1 }).waitFor();
  await a.getByLabel('Agent endpoint URL').fill(agent + '/agent');
  await a.getByRole('status').filter({ hasText: 'Valid, not saved yet' }).waitFor();
  await a.getByRole('button', { name: 'Save pipeline' }).click();
  await a.getByRole('status').filter({ hasText: 'Saved' }).waitFor();

  // --- the panel: preview, then send what it announced ----------------------------------
  await a.getByRole('link', { name: 'Process stored events' }).click();
  await a.getByRole('heading', { name: 'Process stored records', level: 1 }).waitFor();
  await a.getByRole('radio', { name: /The last events/ }).check();
  await a.getByLabel('Number of events').fill('25');
  await assertAccessible(a, 'process stored records');
  await shot(a, 'backlog-form');
  await a.getByRole('button', { name: 'Preview' }).click();
  const preview = a.getByRole('status', { name: 'Preview' });
  await preview.getByText('25 events, 25 match the trigger, 3 calls to your agent.').waitFor();
  await preview.getByText(/Stored from .+ to .+\./).waitFor();
  assert.equal(await agentCalls(), 0, 'a preview sends nothing');
  await shot(a, 'backlog-preview');

  await a.getByRole('button', { name: 'Send 3 calls to the agent' }).click();
  const dialog = a.getByRole('dialog', { name: 'Send 3 calls to the agent?' });
  await dialog.getByText(/25 stored events \(25 matching the trigger\) go to .+ in 3 calls/).waitFor();
  await shot(a, 'backlog-confirm', false);
  await dialog.getByRole('button', { name: 'Send 3 calls' }).click();
  await dialog.waitFor({ state: 'hidden' });
  const run = a.getByRole('region', { name: 'Latest run' });
  await run.getByText('Done', { exact: false }).waitFor({ timeout: 30_000 });
  await run.getByText('25 of 25 events processed, 3 calls announced.', { exact: false }).waitFor();
  assert.equal(await run.getByRole('progressbar', { name: 'Events processed' }).getAttribute('value'), '25');
  assert.equal(await agentCalls(), 25, 'the agent got the 25 records');
  await assertAccessible(a, 'process stored records, done');
  await shot(a, 'backlog-done');

  // --- a member previews but does not send ----------------------------------------------
  await nav.getByRole('link', { name: 'Members' }).click();
  await a.getByRole('heading', { name: 'Members' }).waitFor();
  await a.getByLabel('Email').fill('mia@example.com');
  await a.getByLabel('Role', { exact: true }).selectOption('member');
  await a.getByRole('button', { name: 'Invite' }).click();
  await a.getByRole('status').filter({ hasText: 'mia@example.com is now a member of orders.' }).waitFor();
  await m.goto(`${base}/projects/${projectID}/pipeline`);
  await m.getByRole('link', { name: 'Process stored events' }).click();
  await m.getByRole('heading', { name: 'Process stored records', level: 1 }).waitFor();
  await m.getByRole('region', { name: 'Latest run' }).getByText('Done').waitFor();
  // By time: everything stored since an hour ago (the form's default), in the member's zone.
  await m.getByRole('radio', { name: /Since a time/ }).check();
  assert.match(await m.getByLabel('Stored since').inputValue(), /^\d{4}-\d\d-\d\dT\d\d:\d\d$/);
  await m.getByRole('button', { name: 'Preview' }).click();
  await m.getByRole('status', { name: 'Preview' }).getByText('25 events, 25 match the trigger, 3 calls to your agent.').waitFor();
  await m.getByText("Only the project's owner and admins can send stored events to the agent.").waitFor();
  assert.equal(await m.getByRole('button', { name: /^Send / }).count(), 0, 'a member is offered no send');
  await assertAccessible(m, 'process stored records as a member');
  await shot(m, 'backlog-member');

  for (const p of [a, m]) assert.deepEqual(p.cspErrors, [], 'no script errors or CSP violations');
  console.log('process stored records: ok');
} catch (err) {
  for (const [i, p] of opened.entries()) await p.screenshot({ path: `${shots}/failed-${i}.png`, fullPage: true }).catch(() => {});
  throw err;
} finally {
  await browser.close();
}
