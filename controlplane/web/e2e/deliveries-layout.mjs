// Deliveries and times in a real browser, by role and label:
// the Deliveries page with replay badges and a delivery waiting for its retry fits 1280
// and 1024 px without a horizontal scroll, every Details button inside the table; times
// show seconds and the time zone; a waiting delivery shows its next retry and each
// attempt's request headers with the destination's credential [redacted]; ?delivery=<id>
// opens that delivery, also after logging in; Recent events opened from an origin the
// receiver does not allow says so, with Live off. Run by
// controlplane/dashboard_deliveries_e2e_test.go (TestDashboardDeliveriesLayoutInTheBrowser):
//   DASHBOARD_URL   the control plane, at http://127.0.0.1:<port> (the receiver allows it)
//   OTHER_URL       the same control plane at http://localhost:<port> (the receiver does not)
//   RECEIVER_URL    the collector (every data-plane role)
//   AGENT_URL       the Go test's agent: 404 until GET {AGENT_URL}/fix, then 200
//   HOOK_URL        a webhook that answers 503 with Retry-After: 120
//   SCREENSHOT_DIR  where each visited page is saved
import assert from 'node:assert/strict';
import { assertAccessible, launch, password, timeout } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const other = process.env.OTHER_URL;
const receiver = process.env.RECEIVER_URL;
const agent = process.env.AGENT_URL;
const hook = process.env.HOOK_URL;
const shots = process.env.SCREENSHOT_DIR || 'test-output/deliveries-layout';
assert.ok(base && other && receiver && agent && hook, 'DASHBOARD_URL, OTHER_URL, RECEIVER_URL, AGENT_URL and HOOK_URL must be set');
const e2e = await launch({ base, shots });
const { browser, shot, signUp } = e2e;

// A page in Berlin's time zone, so that the zone shown is not the machine's UTC by chance.
const zone = /\b\d{2}:\d{2}:\d{2} (GMT\+1|CET|UTC\+1)\b/;
async function newPage(width = 1280) {
  const context = await browser.newContext({ viewport: { width, height: 900 }, timezoneId: 'Europe/Berlin', locale: 'en-US' });
  const page = await context.newPage();
  page.setDefaultTimeout(timeout);
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.scriptErrors = errors;
  return page;
}

async function post(key, path, body, headers = {}) {
  for (let i = 0; ; i++) {
    const res = await fetch(receiver + path, {
      method: 'POST',
      headers: { 'X-API-Key': key, 'Content-Type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    if (res.status !== 401 || i >= 50) {
      const text = await res.text();
      assert.ok(res.ok, `${path} answered ${res.status}: ${text}`);
      return text;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

// The page's layout at its current width: no horizontal scroll, and every Details button
// inside the deliveries table, which is inside the page's main area.
async function assertFits(page, where) {
  const m = await page.evaluate(() => {
    const se = document.scrollingElement;
    const table = document.querySelector('table.deliveries-table').getBoundingClientRect();
    const main = document.querySelector('main').getBoundingClientRect();
    const outside = [...document.querySelectorAll('table.deliveries-table button')]
      .map((b) => ({ name: b.getAttribute('aria-label'), r: b.getBoundingClientRect() }))
      .filter(({ r }) => r.left < table.left - 0.5 || r.right > table.right + 0.5 || r.right > main.right + 0.5)
      .map(({ name, r }) => `${name} at ${Math.round(r.left)}-${Math.round(r.right)}`);
    return { scrollWidth: se.scrollWidth, clientWidth: se.clientWidth, table: [table.left, table.right], main: [main.left, main.right],
      buttons: document.querySelectorAll('table.deliveries-table button').length, outside };
  });
  assert.ok(m.scrollWidth <= m.clientWidth, `${where}: the page scrolls sideways: ${m.scrollWidth} > ${m.clientWidth}`);
  assert.ok(m.table[1] <= m.main[1] + 0.5, `${where}: the table (${m.table}) is wider than the page's main area (${m.main})`);
  assert.ok(m.buttons >= 4, `${where}: ${m.buttons} Details buttons`);
  assert.deepEqual(m.outside, [], `${where}: Details buttons outside the table`);
}

try {
  const a = await newPage();
  await signUp(a, 'dora@example.com');
  await a.getByLabel('Project name').fill('shop');
  await a.getByRole('button', { name: 'Create project' }).click();
  await a.getByRole('heading', { name: 'API keys' }).waitFor();
  const projectID = new URL(a.url()).pathname.split('/')[2];
  const nav = a.getByRole('navigation', { name: 'Main' });
  await a.getByLabel('Key name').fill('ingest');
  await a.getByRole('button', { name: 'Create key' }).click();
  const key = await a.getByLabel('New API key').inputValue();
  await a.getByRole('button', { name: 'I have saved the key' }).click();

  // Two failed agent calls (dead letters), one replayed once the agent is fixed.
  await nav.getByRole('link', { name: 'Pipeline' }).click();
  await a.getByRole('textbox', { name: 'Agent endpoint URL' }).fill(`${agent}/agent`);
  await a.getByRole('button', { name: 'Save pipeline' }).click();
  await a.getByRole('status').filter({ hasText: 'Saved: collectors use it now' }).waitFor();
  await post(key, '/v1/events', { order: 1, message: 'card expired' }, { 'X-Event-Type': 'payment.failed' });
  await nav.getByRole('link', { name: 'Deliveries' }).click();
  await a.getByRole('heading', { name: 'Deliveries', level: 1 }).waitFor();
  await a.getByRole('row').filter({ hasText: 'Dead-lettered' }).first().waitFor({ timeout: 30_000 });
  await post(key, '/v1/events', { order: 2, message: 'card stolen' }, { 'X-Event-Type': 'payment.failed' });
  await a.getByRole('status').filter({ hasText: /^\d+ deliveries, 2 dead-lettered$/ }).waitFor({ timeout: 30_000 });
  assert.equal((await fetch(`${agent}/fix`)).status, 200);
  await a.getByRole('row').filter({ hasText: 'Dead-lettered' }).last().getByRole('button', { name: /^Details of delivery / }).click();
  await a.getByRole('button', { name: 'Replay this delivery' }).click();
  await a.getByRole('status').filter({ hasText: /Replayed 1 delivery/ }).waitFor();
  await a.getByRole('row').filter({ hasText: 'replay' }).filter({ hasText: 'Delivered' }).first().waitFor({ timeout: 30_000 });
  await a.getByRole('row').filter({ hasText: 'replayed' }).first().waitFor();
  await a.getByRole('button', { name: 'Close' }).click();

  // A webhook destination that asks to be retried in two minutes, with a credential in
  // its headers; an agent result for it.
  const made = await a.evaluate(async ({ id, hook }) => {
    const s = await (await fetch('/api/v1/auth/session')).json();
    const res = await fetch(`/api/v1/projects/${id}/sinks`, {
      method: 'POST', headers: { 'X-CSRF-Token': s.csrf_token, 'Content-Type': 'application/json' },
      body: JSON.stringify({ kind: 'webhook', enabled: true, url: `${hook}/hooks/incident-room/escalations`, method: 'POST',
        headers: { Authorization: 'Bearer hook-secret-77', 'X-Team': 'payments' } }),
    });
    return res.status;
  }, { id: projectID, hook });
  assert.equal(made, 201, 'the destination is created');
  // The data plane learns of the destination within a moment; results sent before are not its.
  const waiting = a.getByRole('row').filter({ hasText: 'Retrying' }).filter({ hasText: 'Webhook' });
  const by = Date.now() + 30_000;
  for (let i = 0; !(await waiting.count()); i++) {
    assert.ok(Date.now() < by, 'a result reaches the webhook, which asks for a retry');
    await post(key, '/internal/agent-output', { request_id: `req_layout_${i}`, payload: { summary: `result ${i}` } });
    await waiting.first().waitFor({ timeout: 4000 }).catch(() => {});
  }
  const row = waiting.first();
  assert.match(await row.textContent(), /next \d{2}:\d{2}:\d{2}/, 'the row says when the next retry is due');

  // Times: seconds and the zone, the date only when not today; how long ago on hover.
  const created = a.locator('table.deliveries-table td.col-created time').first();
  assert.match(await created.textContent(), zone);
  assert.match(await created.getAttribute('title'), /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \S+ \((just now|\d+ (s|min) ago)\)$/);

  // The layout at 1280 and 1024 px, replay badges and a waiting delivery among the rows.
  await a.setViewportSize({ width: 1280, height: 900 });
  await assertFits(a, '1280 px');
  await shot(a, 'deliveries-1280');
  await a.setViewportSize({ width: 1024, height: 900 });
  await assertFits(a, '1024 px');
  await shot(a, 'deliveries-1024');

  // The waiting delivery's details: when the next retry is due, and what each attempt sent.
  await row.getByRole('button', { name: /^Details of delivery / }).click();
  const panel = a.getByRole('region', { name: /^Delivery / });
  await panel.getByRole('table', { name: 'Attempt log' }).waitFor();
  const next = panel.getByRole('definition').filter({ has: a.locator('time') }).filter({ hasText: /\(in \d+ (s|min)\)/ });
  await next.waitFor();
  assert.match(await next.textContent(), zone, 'the next retry at a time with seconds and zone');
  assert.equal(await panel.getByRole('term').filter({ hasText: /^Next retry at$/ }).count(), 1);
  assert.match(await panel.getByRole('table', { name: 'Attempt log' }).locator('time').first().textContent(), zone);
  await panel.getByText('Request headers of attempt 1').click();
  const headers = panel.locator('dl[aria-label="Request headers of attempt 1"]');
  await headers.waitFor();
  const text = await headers.innerText();
  assert.match(text, /Authorization\s+\[redacted\]/);
  assert.match(text, /X-Team\s+\[redacted\]/);
  assert.match(text, /Webhook-Signature\s+\[redacted\]/);
  assert.match(text, /X-Request-Id\s+req_layout_\d+/);
  assert.ok(!(await a.content()).includes('hook-secret-77'), 'the credential is nowhere on the page');
  const deliveryID = (await panel.getAttribute('aria-label')).replace(/^Delivery /, '');
  assert.equal(new URL(a.url()).searchParams.get('delivery'), deliveryID, 'the address names the open delivery');
  await assertFits(a, '1024 px with details open');
  await shot(a, 'deliveries-1024-details');
  await a.setViewportSize({ width: 1280, height: 900 });
  await assertAccessible(a, 'deliveries details');
  await shot(a, 'deliveries-1280-details');

  // ?delivery=<id> opens it: in a new tab, and for someone who must log in first.
  const link = `${base}/projects/${projectID}/deliveries?delivery=${deliveryID}`;
  const b = await a.context().newPage();
  await b.goto(link);
  await b.getByRole('region', { name: `Delivery ${deliveryID}` }).getByRole('table', { name: 'Attempt log' }).waitFor();
  await b.close();
  const c = await newPage();
  await c.goto(link);
  await c.getByRole('heading', { name: 'Log in' }).waitFor();
  await c.getByLabel('Email').fill('dora@example.com');
  await c.getByLabel('Password').fill(password);
  await c.getByRole('button', { name: 'Log in' }).click();
  await c.getByRole('region', { name: `Delivery ${deliveryID}` }).getByRole('table', { name: 'Attempt log' }).waitFor();
  assert.equal(new URL(c.url()).pathname, `/projects/${projectID}/deliveries`);
  await shot(c, 'delivery-link-after-login');
  assert.deepEqual([...a.scriptErrors, ...c.scriptErrors], [], 'no script errors');

  // Recent events from an origin the receiver does not allow: said so, Live off.
  const o = await newPage();
  await o.goto(`${other}/login`);
  await o.getByLabel('Email').fill('dora@example.com');
  await o.getByLabel('Password').fill(password);
  await o.getByRole('button', { name: 'Log in' }).click();
  await o.getByRole('heading', { name: 'Projects' }).waitFor();
  await o.goto(`${other}/projects/${projectID}/events`);
  await o.getByRole('heading', { name: 'Recent events', level: 1 }).waitFor();
  const otherOrigin = new URL(other).origin;
  const alert = o.getByRole('alert').filter({ hasText: `does not allow this page's origin, ${otherOrigin}` });
  await alert.waitFor({ timeout: 15_000 });
  assert.match(await alert.textContent(), /SVC_DASHBOARD_ORIGIN/);
  assert.ok((await alert.textContent()).includes(`The receiver at ${receiver}`), await alert.textContent());
  await o.getByRole('status', { name: 'Not live', exact: true }).waitFor();
  assert.equal(await o.getByRole('status', { name: 'Live', exact: true }).count(), 0, 'no Live while nothing is read');
  await shot(o, 'events-origin-not-allowed');
  // The same page from the allowed origin is live.
  await a.goto(`${base}/projects/${projectID}/events`);
  await a.getByRole('status', { name: 'Live', exact: true }).waitFor();
  const stored = a.getByRole('list', { name: 'Events' }).locator('time').first();
  await stored.waitFor();
  assert.match(await stored.textContent(), /\b\d{2}:\d{2}:\d{2}\.\d{3} (GMT\+1|CET|UTC\+1)\b/, "a record's time to the millisecond, with its zone");
  await shot(a, 'events-live');
  console.log('deliveries layout: ok');
} finally {
  await browser.close();
}
