// Recent events, Fields, Try it and Deliveries in a real browser, by role and label: the
// pages that read the data plane from the browser with a console token. Run by
// controlplane/dashboard_console_e2e_test.go (TestDashboardConsoleInTheBrowser):
//   DASHBOARD_URL   the control plane
//   RECEIVER_URL    the collector (every data-plane role; console CORS for DASHBOARD_URL)
//   AGENT_URL       the Go test's agent: 404 until GET {AGENT_URL}/fix, then 200
//   SCREENSHOT_DIR  where each visited page is saved
import assert from 'node:assert/strict';
import { assertAccessible, launch, timeout } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const receiver = process.env.RECEIVER_URL;
const agent = process.env.AGENT_URL;
const shots = process.env.SCREENSHOT_DIR || 'test-output/console';
assert.ok(base && receiver && agent, 'DASHBOARD_URL, RECEIVER_URL and AGENT_URL must be set');
const e2e = await launch({ base, shots, viewport: { width: 1280, height: 860 } });
const { browser, shot, newPage, signUp } = e2e;

// post sends to the receiver with the key, retrying while the data plane does not know
// the key yet (it learns it within a second).
async function post(key, path, body, headers = {}) {
  for (let i = 0; ; i++) {
    const res = await fetch(receiver + path, {
      method: 'POST',
      headers: { 'X-API-Key': key, 'Content-Type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    if (res.status !== 401 || i >= 50) {
      assert.ok(res.ok, `${path} answered ${res.status}: ${await res.text()}`);
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

const sendEvent = (key, type, body) => post(key, '/v1/events', body, { 'X-Event-Type': type });
const sendLog = (key) => post(key, '/v1/logs', {
  resourceLogs: [{
    resource: { attributes: [{ key: 'service.name', value: { stringValue: 'checkout' } }] },
    scopeLogs: [{ logRecords: [{ severityNumber: 17, severityText: 'ERROR', body: { stringValue: 'payment provider timed out' },
      attributes: [{ key: 'http.method', value: { stringValue: 'POST' } }] }] }],
  }],
});

// showsRow waits for a row of Recent events with text, checking every frame, so the time
// it took is the page's, not the wait's polling. Events must appear "within a second":
// 1,200 ms leaves 200 for the browser to run the test's own checks.
const showsRow = (page, text) => page.waitForFunction((t) => [...document.querySelectorAll('[role=list][aria-label=Events] [role=listitem]')]
  .some((el) => el.textContent.includes(t)), text, { polling: 'raf', timeout: 1200 });

// The events the list holds (all rows, not only the ones in the DOM).
const listSize = (page) => page.evaluate(() =>
  Number(document.querySelector('[role=list][aria-label=Events] [role=listitem]')?.getAttribute('aria-setsize') ?? 0));

const opened = [];
try {
  const a = await newPage();
  opened.push(a);
  const m = await newPage();
  await signUp(m, 'mike@example.com');
  await signUp(a, 'olive@example.com');
  await a.getByLabel('Project name').fill('shop');
  await a.getByRole('button', { name: 'Create project' }).click();
  await a.getByRole('heading', { name: 'API keys' }).waitFor();
  const projectID = new URL(a.url()).pathname.split('/')[2];
  const nav = a.getByRole('navigation', { name: 'Main' });
  await a.getByLabel('Key name').fill('ingest');
  await a.getByRole('button', { name: 'Create key' }).click();
  const key = await a.getByLabel('New API key').inputValue();
  await a.getByRole('button', { name: 'I have saved the key' }).click();

  // --- recent events: live, newest first, filtered, expanded, paused ----------------------
  await nav.getByRole('link', { name: 'Recent events' }).click();
  await a.getByRole('heading', { name: 'Recent events', level: 1 }).waitFor();
  await a.getByText('No events yet.').waitFor();
  const list = a.getByRole('list', { name: 'Events' });
  await sendEvent(key, 'payment.failed', { order: 1042, amount: 12.5, status: 'failed', message: 'card declined' });
  let sent = Date.now();
  await showsRow(a, 'card declined');
  console.log(`the first event showed ${Date.now() - sent} ms after it was accepted`);
  await sendEvent(key, 'order.created', { order: 1043, amount: 99, status: 'created', message: 'order placed' });
  await sendLog(key);
  await sendEvent(key, 'payment.failed', { order: 1044, amount: 7, status: 'failed', message: 'insufficient funds' });
  sent = Date.now();
  await showsRow(a, 'insufficient funds');
  console.log(`later events showed within ${Date.now() - sent} ms, without a reload`);
  const order = await list.getByRole('listitem').allTextContents();
  assert.ok(order[0].includes('insufficient funds') && order[order.length - 1].includes('card declined'), `newest first: ${order}`);
  assert.equal(await list.getByRole('listitem').count(), 4);

  await a.getByLabel('Event type').selectOption('payment.failed');
  await a.getByRole('status').filter({ hasText: '2 of 4 events' }).waitFor();
  await a.getByLabel('Event type').selectOption('');
  await a.getByLabel('Signal').selectOption('log');
  await a.getByRole('status').filter({ hasText: '1 of 4 events' }).waitFor();
  assert.ok((await list.getByRole('listitem').textContent()).includes('payment provider timed out'));
  await a.getByLabel('Signal').selectOption('');

  await list.getByRole('button', { name: /card declined/ }).click();
  const detail = a.getByRole('region', { name: /^Event \d+$/ });
  const json = await detail.getByRole('figure').locator('pre').textContent();
  assert.deepEqual(JSON.parse(json), { order: 1042, amount: 12.5, status: 'failed', message: 'card declined', _event_type: 'payment.failed' },
    'the full record, pretty-printed');
  assert.ok(json.includes('\n  "order": 1042'), 'indented');
  assert.equal(await list.getByRole('button', { name: /card declined/ }).getAttribute('aria-expanded'), 'true');
  await assertAccessible(a, 'recent events');
  await shot(a, 'recent-events');

  await a.getByRole('button', { name: 'Pause' }).click();
  await a.getByRole('status').filter({ hasText: 'Paused' }).waitFor();
  assert.equal(await a.getByRole('button', { name: 'Resume' }).getAttribute('aria-pressed'), 'true');
  await a.getByRole('button', { name: 'Resume' }).click();
  await a.getByRole('status').filter({ hasText: 'Live' }).waitFor();

  // --- fields: share, types, and a field becomes valid OTTL in the trigger ---------------
  await nav.getByRole('link', { name: 'Fields' }).click();
  await a.getByRole('heading', { name: 'Fields', level: 1 }).waitFor();
  const fieldRow = (path) => a.getByRole('row').filter({ has: a.getByRole('cell', { name: path, exact: true }) });
  await fieldRow('attributes.http.method').waitFor();
  assert.equal(await fieldRow('attributes.http.method').locator('code').textContent(), 'attributes["http.method"]');
  assert.equal(await fieldRow('resourceAttributes.service.name').locator('code').textContent(), 'resource_attributes["service.name"]');
  assert.equal(await fieldRow('_event_type').locator('code').textContent(), 'event["_event_type"]');
  assert.match(await fieldRow('_event_type').textContent(), /75%/, '3 of the 4 records have an event type');
  assert.match(await fieldRow('amount').textContent(), /number/);
  await assertAccessible(a, 'fields');
  await shot(a, 'fields');
  await a.getByRole('button', { name: 'Add attributes.http.method to the trigger' }).click();
  await a.getByRole('heading', { name: 'Pipeline', level: 1 }).waitFor();
  const trigger = a.getByRole('textbox', { name: 'Trigger' });
  assert.equal(await trigger.inputValue(), 'attributes["http.method"] != nil');
  await a.getByRole('status').filter({ hasText: 'Valid, not saved yet' }).waitFor();
  await shot(a, 'pipeline-field-added');

  // --- try it: the unsaved pipeline over the stored records -------------------------------
  await trigger.fill('event["_event_type"] == "payment.failed"');
  await a.getByRole('button', { name: 'Add statement' }).click();
  await a.getByRole('textbox', { name: 'Statement 1' }).fill('set(event["team"], "payments")');
  await a.getByRole('status').filter({ hasText: 'Valid, not saved yet' }).waitFor();
  await a.getByRole('button', { name: 'Try it', exact: true }).click();
  const result = a.getByRole('region', { name: 'Try it result' });
  await result.getByText(/^2 of 4\s*records matched/).waitFor();
  const matched = result.getByRole('table', { name: 'Records the trigger matched' });
  assert.equal(await matched.getByRole('row').count(), 3, 'a header and the two matched records');
  assert.ok((await matched.textContent()).includes('insufficient funds'));
  const t1 = JSON.parse(await result.getByRole('figure').filter({ hasText: 'Transformed record 1' }).locator('pre').textContent());
  assert.equal(t1.team, 'payments', 'the transforms ran');
  const call = JSON.parse(await result.getByRole('figure').filter({ hasText: 'Call 1 body' }).locator('pre').textContent());
  assert.ok(Array.isArray(call) && call.length === 2, 'one call with both records (batches mode)');
  assert.deepEqual(call.map((r) => r.message).sort(), ['card declined', 'insufficient funds']);
  await assertAccessible(a, 'try it');
  await shot(a, 'pipeline-try-it');

  // --- deliveries: a 404 agent's call is dead-lettered, seen, replayed ---------------------
  await a.getByRole('textbox', { name: 'Agent endpoint URL' }).fill(`${agent}/agent`);
  await a.getByRole('button', { name: 'Save pipeline' }).click();
  await a.getByRole('status').filter({ hasText: 'Saved: collectors use it now' }).waitFor();
  // The data plane has the pipeline within a moment; a payment failure then calls the agent.
  await sendEvent(key, 'payment.failed', { order: 1045, amount: 3, status: 'failed', message: 'card expired' });
  await nav.getByRole('link', { name: 'Deliveries' }).click();
  await a.getByRole('heading', { name: 'Deliveries', level: 1 }).waitFor();
  const deadRow = a.getByRole('row').filter({ hasText: 'Dead-lettered' }).last();
  await deadRow.waitFor({ timeout: 30_000 });
  assert.ok((await deadRow.textContent()).includes('404'), 'the status the agent answered');
  // A second failure, so that one is replayed on its own and the other by "Replay all".
  await sendEvent(key, 'payment.failed', { order: 1046, amount: 5, status: 'failed', message: 'card stolen' });
  await a.getByRole('status').filter({ hasText: '2 deliveries, 2 dead-lettered' }).waitFor({ timeout: 30_000 });
  await a.getByRole('heading', { name: 'Ledger' }).waitFor();
  await a.getByRole('img', { name: /deliveries, \d+ failed/ }).waitFor();
  await deadRow.getByRole('button', { name: /^Details of delivery / }).click();
  const dpanel = a.getByRole('region', { name: /^Delivery / });
  const attempts = dpanel.getByRole('table', { name: 'Attempt log' });
  await attempts.waitFor();
  assert.ok((await attempts.textContent()).includes('404'));
  // The oldest dead letter holds 1045, the first record sent after the agent URL was set:
  // a pipeline starts from new records, so 1042 and the others stored before never reach
  // the agent (they are a backlog, sent only when asked for).
  const requestBody = await dpanel.getByRole('figure').filter({ hasText: 'Request body' }).textContent();
  assert.ok(requestBody.includes('card expired'), 'the request body is what was sent');
  assert.ok(!requestBody.includes('card declined'), 'a record stored before the agent URL was set is not sent');
  assert.ok((await dpanel.getByRole('figure').filter({ hasText: 'Response body' }).textContent()).includes('no such route'));
  await assertAccessible(a, 'deliveries');
  await shot(a, 'deliveries-dead-letter');

  // A member sees the deliveries and no replay.
  await nav.getByRole('link', { name: 'Members' }).click();
  await a.getByRole('heading', { name: 'Members' }).waitFor();
  await a.getByLabel('Email').fill('mike@example.com');
  await a.getByLabel('Role', { exact: true }).selectOption('member');
  await a.getByRole('button', { name: 'Invite' }).click();
  await a.getByRole('status').filter({ hasText: 'mike@example.com is now a member of shop.' }).waitFor();
  await m.goto(`${base}/projects/${projectID}/deliveries`);
  await m.getByRole('heading', { name: 'Deliveries', level: 1 }).waitFor();
  const mDead = m.getByRole('row').filter({ hasText: 'Dead-lettered' }).first();
  await mDead.waitFor();
  await mDead.getByRole('button', { name: /^Details of delivery / }).click();
  await m.getByRole('region', { name: /^Delivery / }).getByRole('table', { name: 'Attempt log' }).waitFor();
  assert.equal(await m.getByRole('button', { name: /Replay/ }).count(), 0, 'a member is offered no replay');
  await shot(m, 'deliveries-member');
  // On Fields a member copies a field's OTTL; the trigger is not theirs to change.
  await m.goto(`${base}/projects/${projectID}/fields`);
  await m.getByRole('button', { name: 'Copy the OTTL of attributes.http.method' }).waitFor();
  assert.equal(await m.getByRole('button', { name: /to the trigger$/ }).count(), 0, 'a member is offered no trigger change');

  // The owner fixes the agent and replays the dead letter.
  assert.equal((await fetch(`${agent}/fix`)).status, 200);
  await nav.getByRole('link', { name: 'Deliveries' }).click();
  await deadRow.getByRole('button', { name: /^Details of delivery / }).click();
  await a.getByRole('button', { name: 'Replay this delivery' }).click();
  await a.getByRole('status').filter({ hasText: /Replayed 1 delivery/ }).waitFor();
  await a.getByRole('row').filter({ hasText: 'replay' }).filter({ hasText: 'Delivered' }).first().waitFor({ timeout: 30_000 });
  await a.getByText('Replayed as').waitFor();
  // Replay all: a confirmation, then the other dead letter goes again.
  await a.getByRole('button', { name: 'Replay all dead letters' }).click();
  const dialog = a.getByRole('dialog', { name: 'Replay all dead letters?' });
  await dialog.getByText('1 dead-lettered delivery not replayed yet is sent again').waitFor();
  await dialog.getByRole('button', { name: 'Replay all' }).click();
  await a.getByRole('status').filter({ hasText: /Replayed 1 delivery/ }).waitFor();
  await a.getByRole('status').filter({ hasText: /^4 deliveries, 2 dead-lettered$/ }).waitFor({ timeout: 30_000 });
  await a.getByRole('definition').filter({ hasText: /^0 records of failed calls$/ }).waitFor({ timeout: 30_000 });
  await a.getByText('✓ Balanced').waitFor({ timeout: 30_000 });
  assert.ok(await a.getByRole('button', { name: 'Replay all dead letters' }).isDisabled(), 'nothing left to replay');
  await shot(a, 'deliveries-replayed');

  // --- the ledger tells of calls the guardrails held back and of stray results ------------
  // A cooldown: after a call, payment failures within ten minutes call nobody.
  await nav.getByRole('link', { name: 'Pipeline' }).click();
  await a.getByRole('heading', { name: 'Pipeline', level: 1 }).waitFor();
  await a.getByLabel('Cooldown', { exact: true }).fill('600');
  await a.getByRole('button', { name: 'Save pipeline' }).click();
  await a.getByRole('status').filter({ hasText: 'Saved: collectors use it now' }).waitFor();
  await nav.getByRole('link', { name: 'Deliveries' }).click();
  await a.getByRole('heading', { name: 'Ledger' }).waitFor();
  const heldBack = a.getByRole('definition').filter({ hasText: /^[1-9][\d,]* of the dropped: held back by cooldown or call limits$/ });
  // The collectors take the saved cooldown within a moment: until then a failure is a call
  // like any other, so failures are sent until one is held back (the ledger refreshes every 3 s).
  const cooldownBy = Date.now() + 30_000;
  for (let i = 0; !(await heldBack.count()); i++) {
    assert.ok(Date.now() < cooldownBy, 'a payment failure within the cooldown is held back and the ledger says so');
    await sendEvent(key, 'payment.failed', { order: 1100 + i, amount: 1, status: 'failed', message: `card declined again ${i}` });
    await heldBack.waitFor({ timeout: 4000 }).catch(() => {});
  }
  // A result under a request id the service never issued to this project.
  await post(key, '/internal/agent-output', { request_id: 'req_made_up_by_someone', payload: { summary: 'not asked for' } });
  await a.getByRole('definition').filter({ hasText: /^1 posted under a request id this project never issued$/ }).waitFor({ timeout: 30_000 });
  await assertAccessible(a, 'deliveries ledger');
  await shot(a, 'deliveries-held-back-unmatched');

  // --- another tenant: no console token, no console read, no page ------------------------
  const x = await newPage();
  await signUp(x, 'mallory@example.com');
  await x.goto(`${base}/projects/${projectID}/events`);
  await x.getByRole('heading', { name: 'Project not found' }).waitFor();
  const refused = await x.evaluate(async ({ id, receiver }) => {
    const s = await (await fetch('/api/v1/auth/session')).json();
    const tok = await fetch(`/api/v1/projects/${id}/console-token`, { method: 'POST', headers: { 'X-CSRF-Token': s.csrf_token } });
    // Her own project's token does not open the other project either.
    const own = await (await fetch('/api/v1/projects', { method: 'POST', headers: { 'X-CSRF-Token': s.csrf_token, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'mine' }) })).json();
    const mine = await (await fetch(`/api/v1/projects/${own.id}/console-token`, { method: 'POST', headers: { 'X-CSRF-Token': s.csrf_token } })).json();
    const read = await fetch(`${receiver}/console/v1/projects/${id}/events`, { headers: { Authorization: `Bearer ${mine.token}` } });
    return { token: tok.status, read: read.status };
  }, { id: projectID, receiver });
  assert.equal(refused.token, 404, "no console token for another tenant's project");
  assert.ok([401, 403, 404].includes(refused.read), `another project's console token reads nothing: ${refused.read}`);
  await shot(x, 'other-tenant');

  // --- a push source's records, and the source filter (answered by the receiver) ---------
  const source = await a.evaluate(async (id) => {
    const s = await (await fetch('/api/v1/auth/session')).json();
    const r = await fetch(`/api/v1/projects/${id}/sources`, { method: 'POST', headers: { 'X-CSRF-Token': s.csrf_token, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'github', connector: 'webhook', event_type: 'github.push' }) });
    return r.json();
  }, projectID);
  assert.ok(source.ingest_url && source.api_key, JSON.stringify(source));
  for (let i = 0; ; i++) {
    const res = await fetch(source.ingest_url, { method: 'POST', headers: { Authorization: `Bearer ${source.api_key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ action: 'opened', repo: { name: 'web' } }) });
    if (res.ok) break;
    assert.ok(i < 50 && (res.status === 401 || res.status === 404), `the push source answered ${res.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  await nav.getByRole('link', { name: 'Recent events' }).click();
  await showsRow(a, 'github.push');
  await a.getByLabel('Source').selectOption({ label: 'github' });
  await a.getByRole('status').filter({ hasText: /^1 event$/ }).waitFor();
  assert.ok((await list.getByRole('listitem').textContent()).includes('github.push'));
  await list.getByRole('button', { name: /github\.push/ }).click();
  await a.getByRole('region', { name: /^Event \d+$/ }).getByText('github', { exact: true }).waitFor();
  await shot(a, 'recent-events-source');
  await a.getByLabel('Source').selectOption({ label: 'All sources' });
  await a.getByRole('status').filter({ hasText: /^\d+ events$/ }).waitFor();

  // --- 5,000 rows stay virtualised ------------------------------------------------------
  await list.getByRole('listitem').first().waitFor();
  const start = await listSize(a);
  const total = 5000;
  for (let sentN = 0; sentN < total; ) {
    const n = Math.min(450, total - sentN);
    const batch = Array.from({ length: n }, (_, i) => ({ order: 20000 + sentN + i, status: i % 7 ? 'ok' : 'failed', message: `bulk event ${sentN + i}` }));
    await post(key, '/v1/events/batch', batch, { 'X-Event-Type': 'bulk' });
    sentN += n;
    const want = Math.min(5000, start + sentN);
    const deadline = Date.now() + timeout;
    while ((await listSize(a)) < want) {
      assert.ok(Date.now() < deadline, `the list reached ${await listSize(a)} of ${want} rows`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  assert.equal(await listSize(a), 5000, 'the view keeps the newest 5,000');
  await a.getByRole('status').filter({ hasText: '5,000 events' }).waitFor();
  const inDom = await list.getByRole('listitem').count();
  assert.ok(inDom < 60, `only the rows in view are in the DOM: ${inDom} of 5000`);
  // Scroll through it a frame at a time, and say how smooth it was (not asserted: timing).
  const fps = await a.evaluate(() => new Promise((done) => {
    const el = document.querySelector('.events-scroll');
    const t0 = performance.now();
    let frames = 0;
    const stepFrame = () => {
      el.scrollTop += 400;
      frames++;
      if (el.scrollTop + el.clientHeight >= el.scrollHeight - 1 || frames > 600) done(Math.round((frames * 1000) / (performance.now() - t0)));
      else requestAnimationFrame(stepFrame);
    };
    requestAnimationFrame(stepFrame);
  }));
  console.log(`scrolled 5,000 rows at ${fps} frames per second`);
  await list.locator('[aria-posinset="5000"]').waitFor();
  assert.ok((await list.getByRole('listitem').count()) < 60, 'still only the rows in view at the bottom');
  // The keyboard reaches rows that were not in the DOM: End, then up.
  await list.getByRole('listitem').first().getByRole('button').focus();
  const focusedRow = (n) => a.waitForFunction((want) => document.activeElement.closest('[aria-posinset]')?.getAttribute('aria-posinset') === want, String(n));
  await a.keyboard.press('Home');
  await focusedRow(1);
  await a.keyboard.press('ArrowDown');
  await focusedRow(2);
  await a.keyboard.press('End');
  await focusedRow(5000);
  await a.keyboard.press('ArrowUp');
  await focusedRow(4999);
  await shot(a, 'recent-events-5000', false);

  for (const p of [a, m, x]) assert.deepEqual(p.cspErrors, [], 'no script errors or CSP violations');
  console.log('console pages: ok');
} catch (err) {
  for (const [i, p] of opened.entries()) await p.screenshot({ path: `${shots}/failed-${i}.png`, fullPage: true }).catch(() => {});
  throw err;
} finally {
  await browser.close();
}
