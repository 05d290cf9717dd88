// Incidents in a real browser, by role and label, as an ops engineer meets them: the empty
// Incidents page says why (legacy mode) and links to the Pipeline page, where incident
// mode is set with its fingerprint and durations; with incidents in the receiver's store,
// the open one is listed first, its page tells its story, and Acknowledge shows who
// acknowledged without a reload; a member sees the actions disabled and why; a Slack app
// destination keeps its tokens write-only and shows its interactions URL and Slack's
// steps. Run by controlplane/dashboard_incidents_e2e_test.go:
//   DASHBOARD_URL   the control plane
//   RECEIVER_URL    the receiver (console API, interactions URL)
//   SEED_URL        POST {SEED_URL}?project=<id> writes the project's incidents, answers
//                   the open incident's call request id
//   SCREENSHOT_DIR  where each visited page is saved
import assert from 'node:assert/strict';
import { assertAccessible, launch } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const receiver = process.env.RECEIVER_URL;
const seedURL = process.env.SEED_URL;
const shots = process.env.SCREENSHOT_DIR || 'test-output/incidents';
assert.ok(base && receiver && seedURL, 'DASHBOARD_URL, RECEIVER_URL and SEED_URL must be set');
const e2e = await launch({ base, shots });
const { browser, shot, newPage, signUp } = e2e;

async function post(key, body) {
  for (let i = 0; ; i++) {
    const res = await fetch(receiver + '/v1/events', {
      method: 'POST', headers: { 'X-API-Key': key, 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
    // A new key reaches the receiver's mirror within a moment.
    if (res.status !== 401 || i >= 50) {
      assert.ok(res.ok, `/v1/events answered ${res.status}: ${await res.text()}`);
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

try {
  const a = await newPage();
  await signUp(a, 'olga@example.com');
  await a.getByLabel('Project name').fill('checkout');
  await a.getByRole('button', { name: 'Create project' }).click();
  await a.getByRole('heading', { name: 'API keys' }).waitFor();
  const projectID = new URL(a.url()).pathname.split('/')[2];
  const nav = a.getByRole('navigation', { name: 'Main' });
  await a.getByLabel('Key name').fill('ingest');
  await a.getByRole('button', { name: 'Create key' }).click();
  const key = await a.getByLabel('New API key').inputValue();
  await a.getByRole('button', { name: 'I have saved the key' }).click();
  // Errors of two services and a notice: Try it groups the errors into two incidents.
  for (const [service, level, message] of [['checkout', 'error', 'HTTP 502 from payments'], ['checkout', 'error', 'HTTP 502 from payments'],
    ['search', 'error', 'p99 latency 2.4 s'], ['checkout', 'info', 'deploy v2.31 finished']]) {
    await post(key, { service, level, message });
  }

  // --- no incidents yet: the page says why, and where to change it ----------------------
  await nav.getByRole('link', { name: 'Incidents' }).click();
  await a.getByRole('heading', { name: 'Incidents', level: 1 }).waitFor();
  await a.getByText('No incidents yet').waitFor();
  await a.getByText(/runs in legacy mode/).waitFor();
  await assertAccessible(a, 'incidents, empty');
  await shot(a, 'incidents-empty');

  // --- the pipeline in incident mode, with its fields -----------------------------------
  await a.getByRole('link', { name: 'Set incident mode on the Pipeline page' }).click();
  await a.getByRole('heading', { name: 'Pipeline', level: 1 }).waitFor();
  assert.ok(await a.getByRole('radio', { name: /^Legacy/ }).isChecked(), 'a new project is in legacy mode');
  await a.getByRole('radio', { name: /^Incident/ }).check();
  assert.equal(await a.getByRole('textbox', { name: 'Group wait' }).getAttribute('placeholder'), '30s', 'the default shows');
  assert.equal(await a.getByRole('textbox', { name: 'Group interval' }).getAttribute('placeholder'), '5m');
  assert.equal(await a.getByRole('textbox', { name: 'Resolve after' }).getAttribute('placeholder'), '30m');
  assert.equal(await a.getByRole('textbox', { name: 'Group key' }).count(), 0, 'the fingerprint replaces the group key');
  await a.getByRole('textbox', { name: 'Trigger' }).fill('event["level"] == "error"');
  await a.getByRole('textbox', { name: 'Fingerprint' }).fill('event["service"]');
  await a.getByRole('textbox', { name: 'Resolve when' }).fill('event["status"] == "resolved"');
  await a.getByRole('textbox', { name: 'Group wait' }).fill('10s');
  await a.getByRole('textbox', { name: 'Resolve after' }).fill('45m');
  await a.getByRole('status').filter({ hasText: 'Valid, not saved yet' }).waitFor();
  await assertAccessible(a, 'pipeline, incident mode');
  await shot(a, 'pipeline-incident-mode');
  await a.getByRole('button', { name: 'Try it', exact: true }).click();
  const tried = a.getByRole('region', { name: 'Try it result' });
  await tried.getByText(/^3 of 4\s*records matched/).waitFor();
  assert.match(await tried.getByRole('status').textContent(), /· 2 incidents, \d+ calls? · incident mode/, 'two services, two incidents');
  const calls = tried.getByRole('table', { name: 'Incident calls, in the order they would be made' });
  await calls.getByRole('row').filter({ hasText: 'Opening call' }).filter({ hasText: 'checkout' }).first().waitFor();
  await shot(a, 'pipeline-incident-try-it');
  await a.getByRole('button', { name: 'Save pipeline' }).click();
  await a.getByRole('status').filter({ hasText: 'Saved: collectors use it now' }).waitFor();
  await a.reload();
  await a.getByRole('heading', { name: 'Pipeline', level: 1 }).waitFor();
  assert.ok(await a.getByRole('radio', { name: /^Incident/ }).isChecked(), 'incident mode was saved');
  assert.equal(await a.getByRole('textbox', { name: 'Fingerprint' }).inputValue(), 'event["service"]');
  assert.equal(await a.getByRole('textbox', { name: 'Resolve when' }).inputValue(), 'event["status"] == "resolved"');
  assert.equal(await a.getByRole('textbox', { name: 'Group wait' }).inputValue(), '10s');
  assert.equal(await a.getByRole('textbox', { name: 'Resolve after' }).inputValue(), '45m');
  assert.ok(['', '5m'].includes(await a.getByRole('textbox', { name: 'Group interval' }).inputValue()), 'an untouched duration is the default');
  // A duration out of its bounds is named at its field.
  await a.getByRole('textbox', { name: 'Group wait' }).fill('2h');
  await a.getByRole('status').filter({ hasText: /problem to fix before saving/ }).waitFor();
  assert.equal(await a.getByRole('textbox', { name: 'Group wait' }).getAttribute('aria-invalid'), 'true');
  await shot(a, 'pipeline-incident-bad-duration');
  await a.getByRole('button', { name: 'Discard changes' }).click();

  // --- incidents: open first, the story, acknowledge ------------------------------------
  const seeded = await fetch(`${seedURL}?project=${encodeURIComponent(projectID)}`, { method: 'POST' });
  const requestID = await seeded.text();
  assert.equal(seeded.status, 200, `seeding: ${requestID}`);
  await nav.getByRole('link', { name: 'Incidents' }).click();
  await a.getByRole('heading', { name: 'Incidents', level: 1 }).waitFor();
  const rows = a.getByRole('table').getByRole('row');
  await rows.filter({ hasText: 'billing-api' }).waitFor();
  const first = rows.nth(1);
  assert.match(await first.textContent(), /Open.*checkout: HTTP 5xx rate above 5%/, 'the open incident comes first');
  assert.match(await rows.nth(2).textContent(), /Acknowledged.*search.*oncall@example\.com/);
  assert.match(await rows.nth(3).textContent(), /Resolved.*billing-api/, 'resolved ones come last');
  await a.getByRole('group', { name: 'Incidents by status' }).getByText('1 open').waitFor();
  await assertAccessible(a, 'incidents');
  await shot(a, 'incidents-list');

  await a.getByLabel('Status', { exact: true }).selectOption('resolved');
  await a.getByRole('status').filter({ hasText: /^1 incident$/ }).waitFor();
  assert.equal(await rows.filter({ hasText: 'checkout' }).count(), 0, 'the filter leaves the open one out');
  await a.getByLabel('Status', { exact: true }).selectOption('');
  await rows.filter({ hasText: 'checkout' }).waitFor();

  await first.getByRole('link', { name: 'checkout: HTTP 5xx rate above 5%' }).click();
  await a.getByRole('heading', { name: 'checkout: HTTP 5xx rate above 5%', level: 1 }).waitFor();
  assert.match(new URL(a.url()).pathname, new RegExp(`^/projects/${projectID}/incidents/inc_[0-9a-f]+_1$`));
  const summary = a.getByRole('region', { name: 'Incident summary' });
  await summary.getByText(/^\W*Open$/).waitFor();
  const timeline = a.getByRole('list', { name: /^Timeline/ });
  await timeline.getByText(/^Incident opened/).waitFor();
  await timeline.getByText(/Agent called/).waitFor();
  await timeline.getByText('✓ Delivered').waitFor();
  await timeline.getByText(/staging gateway; every card payment fails with 502/).waitFor();
  const link = timeline.getByRole('link', { name: 'View delivery' }).first();
  assert.equal(await link.getAttribute('href'), `/projects/${projectID}/deliveries?delivery=${requestID}`,
    'a call links to its delivery (agent deliveries are keyed by request id)');
  await a.getByRole('region', { name: "The agent's latest finding" }).getByText(/Roll back to v2\.30/).waitFor();
  await assertAccessible(a, 'incident');
  await shot(a, 'incident-open');

  const actions = a.getByRole('group', { name: 'Incident actions' });
  for (const name of ['Acknowledge', 'Resolve', 'Mute 1 h', 'Investigate again']) {
    assert.ok(await actions.getByRole('button', { name }).isEnabled(), `${name} is offered to the owner`);
  }
  await actions.getByRole('button', { name: 'Acknowledge' }).click();
  // Who acted: the receiver names the console token's user ("user:<id>"), the page shows
  // the member's email, and the name the receiver gave on hover.
  await summary.getByText('Acknowledged by olga@example.com').waitFor();
  assert.match(await summary.getByText('olga@example.com', { exact: true }).getAttribute('title'), /^user:\S+$/);
  await summary.getByText(/^\W*Acknowledged$/).waitFor();
  await timeline.getByText('Acknowledged by olga@example.com').waitFor();
  assert.ok(await actions.getByRole('button', { name: 'Acknowledge' }).isDisabled(), 'acknowledged once');
  await shot(a, 'incident-acknowledged');

  // The delivery link opens the Deliveries page on that delivery.
  await link.click();
  await a.getByRole('heading', { name: 'Deliveries', level: 1 }).waitFor();
  assert.equal(new URL(a.url()).searchParams.get('delivery'), requestID);
  await a.goBack();
  await a.getByRole('heading', { name: 'checkout: HTTP 5xx rate above 5%', level: 1 }).waitFor();

  // --- a member sees the actions, disabled, and why -------------------------------------
  const b = await newPage();
  await signUp(b, 'mika@example.com');
  await nav.getByRole('link', { name: 'Members' }).click();
  await a.getByLabel('Email').fill('mika@example.com');
  await a.getByRole('button', { name: 'Invite' }).click();
  await a.getByRole('status').filter({ hasText: 'mika@example.com is now a member' }).waitFor();
  await b.goto(`${base}/projects/${projectID}/incidents`);
  await b.getByRole('heading', { name: 'Incidents', level: 1 }).waitFor();
  await b.getByRole('link', { name: 'search: p99 latency above 2 s' }).click();
  await b.getByRole('heading', { name: 'search: p99 latency above 2 s', level: 1 }).waitFor();
  await b.getByText('Only owners and admins can act on incidents').waitFor();
  const bActions = b.getByRole('group', { name: 'Incident actions' });
  for (const name of ['Acknowledge', 'Resolve', 'Mute 1 h', 'Investigate again']) {
    const btn = bActions.getByRole('button', { name });
    assert.ok(await btn.isDisabled(), `${name} is disabled for a member`);
    assert.equal(await btn.getAttribute('title'), 'Only owners and admins can act on incidents');
  }
  await assertAccessible(b, 'incident as a member');
  await shot(b, 'incident-as-member');

  // --- a Slack app destination ----------------------------------------------------------
  await nav.getByRole('link', { name: 'Destinations' }).click();
  await a.getByRole('heading', { name: 'Destinations', level: 1 }).waitFor();
  await a.getByRole('button', { name: 'Add destination' }).click();
  await a.getByRole('radio', { name: /^Slack app/ }).check();
  assert.equal(await a.getByLabel('URL', { exact: true }).count(), 0, 'a Slack app has no URL to type');
  await a.getByLabel('Channel').fill('#incidents');
  await a.getByLabel('Bot token').fill('xoxb-111-222-e2etoken');
  await a.getByLabel('Signing secret').fill('8f14e45fceea167a5a36dedd4bea2543');
  assert.equal(await a.getByLabel('Bot token').getAttribute('type'), 'password');
  assert.equal(await a.getByLabel('Signing secret').getAttribute('type'), 'password');
  await assertAccessible(a, 'new Slack app');
  await shot(a, 'destination-new-slack-app');
  await a.getByRole('button', { name: 'Add destination' }).click();
  const setup = a.getByRole('region', { name: 'Connect your Slack app to #incidents' });
  await setup.waitFor();
  const interactions = await setup.getByRole('textbox', { name: 'Interactions URL' }).inputValue();
  assert.ok(interactions.startsWith(`${receiver}/slack/interactions/${projectID}/`), interactions);
  await setup.getByRole('button', { name: 'Copy the interactions URL' }).click();
  assert.equal(await a.evaluate(() => navigator.clipboard.readText()), interactions);
  // The test's receiver is plain http: the page says Slack will not post there.
  await setup.getByRole('note').getByText('Slack needs HTTPS:').waitFor();
  await setup.getByText('Interactivity & Shortcuts:').waitFor();
  await setup.getByText('Request URL').waitFor();
  await setup.getByText('chat:write').waitFor();
  await setup.getByText(/invite the bot to the channel/).waitFor();
  const card = a.getByRole('listitem', { name: 'Destination Slack app #incidents' });
  await card.getByText('Bot token set · Signing secret set').waitFor();
  assert.ok(!(await a.content()).includes('xoxb-111-222-e2etoken'), 'the bot token is not shown back');
  await assertAccessible(a, 'Slack app created');
  await shot(a, 'destination-slack-app-created');

  // Editing: the tokens read "set" and are replaced only when asked.
  await a.getByRole('button', { name: 'Done' }).click();
  await card.getByRole('button', { name: 'Edit Slack app #incidents' }).click();
  await a.getByRole('button', { name: 'Replace the bot token' }).waitFor();
  await a.getByRole('button', { name: 'Replace the signing secret' }).waitFor();
  await a.getByLabel('Channel').fill('#payments-incidents');
  await a.getByRole('button', { name: 'Save destination' }).click();
  await a.getByRole('listitem', { name: 'Destination Slack app #payments-incidents' }).getByText('Bot token set · Signing secret set').waitFor();
  await shot(a, 'destination-slack-app-edited');

  for (const p of [a, b]) assert.deepEqual(p.cspErrors, [], 'no script errors or CSP violations');
  console.log(`incidents e2e: ok (${e2e.steps} screenshots in ${shots})`);
} finally {
  await browser.close();
}
