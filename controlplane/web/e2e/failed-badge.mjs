// The failed-deliveries badge in the navigation, by role and label:
// after agent calls are dead-lettered, "Deliveries" in the project's navigation carries a
// badge whose accessible name says how many ("2 failed deliveries"); opening Deliveries
// counts them as seen and the badge goes; a later failure brings it back with the new
// count only. Run by controlplane/dashboard_failedbadge_e2e_test.go
// (TestFailedDeliveriesBadgeInTheBrowser):
//   DASHBOARD_URL   the control plane
//   RECEIVER_URL    the collector (every data-plane role)
//   AGENT_URL       the Go test's agent, which answers 404 (each call dead-lettered at once)
//   SCREENSHOT_DIR  where each visited page is saved
import assert from 'node:assert/strict';
import { assertAccessible, launch } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const receiver = process.env.RECEIVER_URL;
const agent = process.env.AGENT_URL;
const shots = process.env.SCREENSHOT_DIR || 'test-output/failed-badge';
assert.ok(base && receiver && agent, 'DASHBOARD_URL, RECEIVER_URL and AGENT_URL must be set');
const { browser, shot, signUp, newPage } = await launch({ base, shots });

async function post(key, body) {
  for (let i = 0; ; i++) {
    const res = await fetch(receiver + '/v1/events', {
      method: 'POST', headers: { 'X-API-Key': key, 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
    if (res.status !== 401 || i >= 50) {
      assert.ok(res.ok, `/v1/events answered ${res.status}: ${await res.text()}`);
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

try {
  const a = await newPage();
  await signUp(a, 'erin@example.com');
  await a.getByLabel('Project name').fill('checkout-prod');
  await a.getByRole('button', { name: 'Create project' }).click();
  await a.getByRole('heading', { name: 'API keys' }).waitFor();
  const nav = a.getByRole('navigation', { name: 'Main' });
  await a.getByLabel('Key name').fill('ingest');
  await a.getByRole('button', { name: 'Create key' }).click();
  const key = await a.getByLabel('New API key').inputValue();
  await a.getByRole('button', { name: 'I have saved the key' }).click();
  const deliveries = nav.getByRole('link', { name: /^Deliveries/ });
  assert.equal(await nav.getByRole('img', { name: /failed deliver/ }).count(), 0, 'no badge before anything failed');

  await nav.getByRole('link', { name: 'Pipeline' }).click();
  await a.getByRole('textbox', { name: 'Agent endpoint URL' }).fill(`${agent}/agent`);
  await a.getByRole('button', { name: 'Save pipeline' }).click();
  await a.getByRole('status').filter({ hasText: 'Saved: collectors use it now' }).waitFor();

  // Two events, two calls dead-lettered. The data plane takes the URL within a moment,
  // so events are sent until the first failure shows; the badge is read on the way
  // (it polls, and reads again when a page of the project is opened).
  await nav.getByRole('link', { name: 'Fields' }).click();
  const badge = nav.getByRole('img', { name: /^\d+ failed deliver(y|ies)$/ });
  const by = Date.now() + 60_000;
  for (let i = 0; !(await badge.count()); i++) {
    assert.ok(Date.now() < by, 'a failed call shows in the navigation within a minute');
    await post(key, { order: i, message: 'card expired' });
    await badge.waitFor({ timeout: 5000 }).catch(() => {});
    if (!(await badge.count())) await nav.getByRole('link', { name: i % 2 ? 'Fields' : 'Recent events' }).click();
  }
  const first = Number((await badge.getAttribute('aria-label')).split(' ')[0]);
  await post(key, { order: 99, message: 'card stolen' });
  const want = `${first + 1} failed deliveries`;
  await nav.getByRole('link', { name: 'Fields' }).click();
  await nav.getByRole('img', { name: want, exact: true }).waitFor({ timeout: 20_000 }).catch(async () => {
    await nav.getByRole('link', { name: 'Recent events' }).click();
    await nav.getByRole('img', { name: want, exact: true }).waitFor({ timeout: 20_000 });
  });
  assert.match(await deliveries.getAttribute('href'), /\/deliveries$/);
  const name = await deliveries.evaluate((el) => el.textContent);
  assert.equal(name, `Deliveries${first + 1}`, 'the link shows the count beside its label');
  await assertAccessible(a, 'badge');
  await shot(a, 'badge', false);

  // Opening Deliveries counts them as seen: the badge goes, and stays gone elsewhere.
  await deliveries.click();
  await a.getByRole('heading', { name: 'Deliveries', level: 1 }).waitFor();
  await a.getByRole('row').filter({ hasText: 'Dead-lettered' }).first().waitFor({ timeout: 30_000 });
  assert.equal(await nav.getByRole('img', { name: /failed deliver/ }).count(), 0, 'no badge on Deliveries');
  await nav.getByRole('link', { name: 'Fields' }).click();
  await a.getByRole('heading', { name: 'Fields', level: 1 }).waitFor();
  // A new failure after that is counted alone, also after a reload (localStorage).
  await post(key, { order: 100, message: 'card lost' });
  await a.reload();
  await nav.getByRole('img', { name: '1 failed delivery', exact: true }).waitFor({ timeout: 30_000 }).catch(async () => {
    await nav.getByRole('link', { name: 'Recent events' }).click();
    await nav.getByRole('img', { name: '1 failed delivery', exact: true }).waitFor({ timeout: 30_000 });
  });
  await shot(a, 'badge-after-seen', false);
  assert.deepEqual(a.cspErrors, [], 'no script errors');
  console.log('failed-deliveries badge: ok');
} finally {
  await browser.close();
}
