// An incident made by the pipeline itself, seen in a real browser: incident mode set on
// the Pipeline page, error events of one service open one incident, the agent's opening
// call shows on the incident's page with its delivery one click away, the agent's result
// joins the timeline, and the Deliveries ledger counts the incident. Run by
// controlplane/dashboard_incidents_live_e2e_test.go:
//   DASHBOARD_URL   the control plane
//   RECEIVER_URL    the collector (every data-plane role)
//   AGENT_URL       the Go test's agent, answering 200
//   SCREENSHOT_DIR  where each visited page is saved
import assert from 'node:assert/strict';
import { assertAccessible, launch } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const receiver = process.env.RECEIVER_URL;
const agent = process.env.AGENT_URL;
const shots = process.env.SCREENSHOT_DIR || 'test-output/incidents-live';
assert.ok(base && receiver && agent, 'DASHBOARD_URL, RECEIVER_URL and AGENT_URL must be set');
const e2e = await launch({ base, shots });
const { browser, shot, newPage, signUp } = e2e;

async function post(key, path, body) {
  for (let i = 0; ; i++) {
    const res = await fetch(receiver + path, {
      method: 'POST', headers: { 'X-API-Key': key, 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
    // A new key, or a pipeline just saved, reaches the receiver's mirror within a moment.
    if (res.status !== 401 || i >= 50) {
      assert.ok(res.ok, `${path} answered ${res.status}: ${await res.text()}`);
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

try {
  const a = await newPage();
  await signUp(a, 'ines@example.com');
  await a.getByLabel('Project name').fill('shop');
  await a.getByRole('button', { name: 'Create project' }).click();
  await a.getByRole('heading', { name: 'API keys' }).waitFor();
  const projectID = new URL(a.url()).pathname.split('/')[2];
  const nav = a.getByRole('navigation', { name: 'Main' });
  await a.getByLabel('Key name').fill('ingest');
  await a.getByRole('button', { name: 'Create key' }).click();
  const key = await a.getByLabel('New API key').inputValue();
  await a.getByRole('button', { name: 'I have saved the key' }).click();

  await nav.getByRole('link', { name: 'Pipeline' }).click();
  await a.getByRole('heading', { name: 'Pipeline', level: 1 }).waitFor();
  await a.getByRole('radio', { name: /^Incident/ }).check();
  await a.getByRole('textbox', { name: 'Trigger' }).fill('event["level"] == "error"');
  await a.getByRole('textbox', { name: 'Fingerprint' }).fill('event["service"]');
  await a.getByRole('textbox', { name: 'Group wait' }).fill('2s');
  await a.getByRole('textbox', { name: 'Agent endpoint URL' }).fill(`${agent}/agent`);
  await a.getByRole('status').filter({ hasText: 'Valid, not saved yet' }).waitFor();
  await a.getByRole('button', { name: 'Save pipeline' }).click();
  await a.getByRole('status').filter({ hasText: 'Saved: collectors use it now' }).waitFor();

  // The data plane learns of the pipeline within a moment: events sent before it still
  // count as legacy mode's, so the first is sent until an incident opens.
  await nav.getByRole('link', { name: 'Incidents' }).click();
  await a.getByRole('heading', { name: 'Incidents', level: 1 }).waitFor();
  const row = a.getByRole('table').getByRole('row').filter({ hasText: 'checkout' });
  const by = Date.now() + 30_000;
  while (!(await row.count())) {
    assert.ok(Date.now() < by, 'an error event opens an incident');
    await post(key, '/v1/events', { service: 'checkout', level: 'error', message: 'HTTP 502 from payments' });
    await row.first().waitFor({ timeout: 3000 }).catch(() => {});
  }
  await post(key, '/v1/events', { service: 'checkout', level: 'error', message: 'HTTP 502 from payments' });
  await post(key, '/v1/events', { service: 'checkout', level: 'info', message: 'deploy v2.31 finished' });
  await row.getByText(/^\W*Open$/).waitFor();
  await assertAccessible(a, 'incidents, live');
  await shot(a, 'incidents-live-list');

  await row.getByRole('link').first().click();
  const summary = a.getByRole('region', { name: 'Incident summary' });
  await summary.waitFor();
  const timeline = a.getByRole('list', { name: /^Timeline/ });
  const called = timeline.getByRole('listitem').filter({ hasText: 'Agent called: opening call' });
  await called.getByText('✓ Delivered').waitFor({ timeout: 30_000 });
  const requestID = (await called.locator('.tl-req .mono').textContent()).trim();
  assert.ok(requestID, 'the call names its request id');
  await summary.getByRole('term').filter({ hasText: 'Agent calls' }).waitFor();

  // The agent answers with its finding under the call's request id.
  await post(key, '/internal/agent-output', { request_id: requestID,
    payload: { summary: 'checkout v2.31 calls the staging payments gateway: roll back to v2.30.' } });
  await timeline.getByRole('listitem').filter({ hasText: 'Agent result' }).getByText(/roll back to v2\.30/).waitFor({ timeout: 20_000 });
  await a.getByRole('region', { name: "The agent's latest finding" }).getByText(/roll back to v2\.30/).waitFor();
  await assertAccessible(a, 'incident, live');
  await shot(a, 'incident-live');

  // The call's delivery, one click away; the ledger counts the incident.
  await called.getByRole('link', { name: 'View delivery' }).click();
  await a.getByRole('heading', { name: 'Deliveries', level: 1 }).waitFor();
  await a.getByRole('region', { name: `Delivery ${requestID}` }).getByText('Delivered').first().waitFor();
  const ledger = a.getByRole('region', { name: 'Incident counts' });
  await ledger.getByText('Incidents opened').waitFor({ timeout: 20_000 });
  assert.match(await ledger.textContent(), /Incidents opened\s*1\b/, 'one incident');
  assert.match(await ledger.textContent(), /Events per call\s*[1-9]/, 'the call carried the events');
  await shot(a, 'deliveries-incident-ledger');

  assert.deepEqual(a.cspErrors, [], 'no script errors or CSP violations');
  console.log(`incidents live e2e: ok (${e2e.steps} screenshots in ${shots})`);
} finally {
  await browser.close();
}
