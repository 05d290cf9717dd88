// The Pipeline, Destinations and Push sources pages in a real browser, by role and label.
// Run by controlplane/dashboard_e2e_test.go (TestDashboardPipelineInTheBrowser) against
// a real control plane and a pipeline checker:
//   DASHBOARD_URL   the control plane
//   HOOK_URL        a webhook server of the Go test: it records what it receives, and
//                   GET {HOOK_URL}/received answers {"count": n} of the calls it took
//   SECRET_FILE     where the revealed signing secret is written, for the Go test to
//                   verify the received signature with
//   SCREENSHOT_DIR  where each visited page is saved
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { assertAccessible, launch } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const hook = process.env.HOOK_URL;
const secretFile = process.env.SECRET_FILE;
const shots = process.env.SCREENSHOT_DIR || 'test-output/pages';
assert.ok(base && hook && secretFile, 'DASHBOARD_URL, HOOK_URL and SECRET_FILE must be set');
const e2e = await launch({ base, shots });
const { browser, shot, newPage, signUp } = e2e;

async function received() {
  return (await (await fetch(`${hook}/received`)).json()).count;
}

try {
  const a = await newPage();
  await signUp(a, 'carol@example.com');
  await a.getByLabel('Project name').fill('payments');
  await a.getByRole('button', { name: 'Create project' }).click();
  await a.getByRole('heading', { name: 'API keys' }).waitFor();
  const projectID = new URL(a.url()).pathname.split('/')[2];
  const nav = a.getByRole('navigation', { name: 'Main' });

  // --- pipeline: the error at its position as the user types, fixed, saved -------------
  await nav.getByRole('link', { name: 'Pipeline' }).click();
  await a.getByRole('heading', { name: 'Pipeline', level: 1 }).waitFor();
  await assertAccessible(a, 'pipeline');
  const trigger = a.getByRole('textbox', { name: 'Trigger' });
  await trigger.fill('severity_number >= = 17');
  const problem = a.getByText('Error at line 1, column 20:');
  await problem.waitFor();
  assert.equal(await trigger.getAttribute('aria-invalid'), 'true', 'the field is marked invalid for assistive technology');
  const described = await trigger.evaluate((el) => el.getAttribute('aria-describedby').split(' ')
    .map((id) => document.getElementById(id)?.textContent ?? '').join(' '));
  assert.match(described, /Error at line 1, column 20: .*invalid syntax/, 'the error is the field description');
  const snippet = await a.locator('.problem-snippet').textContent();
  assert.equal(snippet, 'severity_number >= = 17\n' + ' '.repeat(19) + '^', 'the caret is under the 20th character');
  await a.getByRole('status').filter({ hasText: '1 problem to fix before saving' }).waitFor();
  await a.getByRole('button', { name: 'Go to line 1, column 20' }).click();
  assert.equal(await trigger.evaluate((el) => el === document.activeElement && el.selectionStart), 19,
    'the cursor is put at the error');
  await shot(a, 'pipeline-invalid-trigger');

  // A second statement with an error: the error is on that statement, at its position.
  await a.getByRole('button', { name: 'Add statement' }).click();
  await a.getByRole('textbox', { name: 'Statement 1' }).fill('set(event["team"], "payments")');
  await a.getByRole('button', { name: 'Add statement' }).click();
  await a.getByRole('textbox', { name: 'Statement 2' }).fill('set(event["tier"], 1');

  await trigger.fill('severity_number >= 17');
  await a.getByText('Error at line 1, column 20:').waitFor({ state: 'detached' });
  await a.getByText('Error at line 1, column 21:').waitFor();
  assert.equal(await a.getByRole('textbox', { name: 'Statement 2' }).getAttribute('aria-invalid'), 'true');
  assert.equal(await trigger.getAttribute('aria-invalid'), null, 'the fixed trigger is no longer marked');
  await a.getByRole('textbox', { name: 'Statement 2' }).fill('set(event["tier"], 1)');
  await a.getByRole('status').filter({ hasText: 'Valid, not saved yet' }).waitFor();
  await a.getByRole('radio', { name: /Window/ }).check();
  await a.getByRole('spinbutton', { name: 'Window duration' }).fill('60');
  await a.getByRole('spinbutton', { name: 'Cooldown' }).fill('90000');
  await a.getByText(/Error: Must be between 0 and 86400/).waitFor();
  await a.getByRole('spinbutton', { name: 'Cooldown' }).fill('300');
  await a.getByRole('textbox', { name: 'Group key' }).fill('resource_attributes["k8s.pod.name"]');
  await a.getByRole('status').filter({ hasText: 'Valid, not saved yet' }).waitFor();
  await shot(a, 'pipeline-valid');
  await a.getByRole('button', { name: 'Save pipeline' }).click();
  await a.getByRole('status').filter({ hasText: 'Saved: collectors use it now' }).waitFor();
  await a.reload();
  await a.getByRole('heading', { name: 'Pipeline', level: 1 }).waitFor();
  assert.equal(await a.getByRole('textbox', { name: 'Trigger' }).inputValue(), 'severity_number >= 17');
  assert.equal(await a.getByRole('textbox', { name: 'Statement 2' }).inputValue(), 'set(event["tier"], 1)');
  assert.ok(await a.getByRole('radio', { name: /Window/ }).isChecked(), 'window mode was saved');
  assert.equal(await a.getByRole('spinbutton', { name: 'Cooldown' }).inputValue(), '300');

  // The signing secret: hidden until revealed, copied, rotated after a confirmation.
  const secretBox = a.getByRole('textbox', { name: 'Signing secret' });
  assert.ok(!(await secretBox.inputValue()).match(/^whsec_[A-Za-z0-9+/]/), 'hidden at first');
  await a.getByRole('button', { name: 'Reveal' }).click();
  const first = await secretBox.inputValue();
  assert.match(first, /^whsec_[A-Za-z0-9+/=]+$/);
  await a.getByRole('button', { name: 'Copy the signing secret' }).click();
  assert.equal(await a.evaluate(() => navigator.clipboard.readText()), first);
  await a.getByRole('button', { name: 'Rotate' }).click();
  const rot = a.getByRole('dialog', { name: 'Rotate the signing secret?' });
  await rot.getByRole('button', { name: 'Rotate secret' }).click();
  await a.getByRole('status').filter({ hasText: 'The secret was rotated' }).waitFor();
  const secret = await secretBox.inputValue();
  assert.match(secret, /^whsec_/);
  assert.notEqual(secret, first, 'a new secret');
  writeFileSync(secretFile, secret);
  await assertAccessible(a, 'pipeline saved');
  await shot(a, 'pipeline-saved-secret');

  // --- destinations: add a webhook, send a test message, see it arrive ------------------
  await nav.getByRole('link', { name: 'Destinations' }).click();
  await a.getByRole('heading', { name: 'Destinations', level: 1 }).waitFor();
  await a.getByText('No destinations yet').waitFor();
  await a.getByRole('button', { name: 'Add destination' }).click();
  await a.getByRole('radio', { name: /Webhook/ }).check();
  await a.getByLabel('URL', { exact: true }).fill(`${hook}/hook`);
  await a.getByRole('button', { name: 'Add header' }).click();
  await a.getByLabel('Header 1 name').fill('X-Team');
  await a.getByLabel('Header 1 value').fill('payments');
  await assertAccessible(a, 'new webhook');
  await shot(a, 'destination-new-webhook');
  await a.getByRole('button', { name: 'Add destination' }).click();
  const webhookCard = a.getByRole('listitem', { name: `Destination webhook ${hook}/hook` });
  await webhookCard.waitFor();
  await webhookCard.getByText('● Enabled').waitFor();

  const before = await received();
  await webhookCard.getByRole('button', { name: /^Send a test message/ }).click();
  await webhookCard.getByRole('status').filter({ hasText: '✓ Test message delivered' }).waitFor();
  await webhookCard.getByText('HTTP 200').waitFor();
  assert.equal(await received(), before + 1, 'the webhook server received the test message');
  await webhookCard.getByText("The destination's answer").click();
  await webhookCard.getByText('"received": true').waitFor();
  await shot(a, 'destination-test-delivered');

  // A destination that answers 503: the test says so, with the answer.
  await a.getByRole('button', { name: 'Add destination' }).click();
  await a.getByLabel('URL', { exact: true }).fill(`${hook}/down`);
  await a.getByRole('button', { name: 'Add destination' }).click();
  const downCard = a.getByRole('listitem', { name: `Destination webhook ${hook}/down` });
  await downCard.getByRole('button', { name: /^Send a test message/ }).click();
  await downCard.getByRole('status').filter({ hasText: '✗ Test message not delivered' }).waitFor();
  await downCard.getByText('The destination answered 503 Service Unavailable').waitFor();
  await downCard.getByText("The destination's answer").click();
  await downCard.getByText('"error": "maintenance"').waitFor();
  await shot(a, 'destination-test-failed');
  await downCard.getByRole('button', { name: /^Delete/ }).click();
  await a.getByRole('dialog', { name: 'Delete this destination?' }).getByRole('button', { name: 'Delete destination' }).click();
  await downCard.waitFor({ state: 'detached' });

  // A chat destination (Slack's shape), tested, then disabled, edited and deleted.
  await a.getByRole('button', { name: 'Add destination' }).click();
  await a.getByRole('radio', { name: /Chat/ }).check();
  await a.getByLabel('Incoming webhook URL').fill(`${hook}/slack`);
  await a.getByLabel('Platform').selectOption('slack');
  await a.getByLabel('Text template').fill(':rotating_light: {text}');
  await a.getByRole('button', { name: 'Add destination' }).click();
  const chatCard = a.getByRole('listitem', { name: `Destination chat ${hook}/slack` });
  await chatCard.waitFor();
  await chatCard.getByRole('button', { name: /^Send a test message/ }).click();
  await chatCard.getByRole('status').filter({ hasText: '✓ Test message delivered' }).waitFor();
  await chatCard.getByRole('button', { name: /^Disable/ }).click();
  await chatCard.getByText('○ Disabled').waitFor();
  await webhookCard.getByRole('button', { name: /^Edit/ }).click();
  await a.getByRole('heading', { name: 'Edit destination' }).waitFor();
  await a.getByLabel('Method').selectOption('PUT');
  await a.getByRole('button', { name: 'Save destination' }).click();
  await webhookCard.getByText('Webhook · PUT').waitFor();
  await assertAccessible(a, 'destinations');
  await shot(a, 'destinations-list');
  await chatCard.getByRole('button', { name: /^Delete/ }).click();
  await a.getByRole('dialog', { name: 'Delete this destination?' }).getByRole('button', { name: 'Delete destination' }).click();
  await chatCard.waitFor({ state: 'detached' });

  // --- push sources: create (shown once), test a sample, delete -------------------------
  await nav.getByRole('link', { name: 'Push sources' }).click();
  await a.getByRole('heading', { name: 'Push sources', level: 1 }).waitFor();
  await a.getByLabel('Source name').fill('github');
  await a.getByLabel('Event type field').fill('action');
  await a.getByLabel('Text template').fill('{repo.name}: {action}');
  await a.getByRole('button', { name: 'Add label' }).click();
  await a.getByLabel('Label 1 name').fill('repo');
  await a.getByLabel('Label 1 field path').fill('repo.name');
  // Tested before it exists: the form's settings against a payload without repo.name.
  await a.getByLabel('Sample payload (JSON)').fill('{"action": "opened"}');
  await a.getByRole('button', { name: 'Test the mapping' }).click();
  await a.getByRole('list', { name: 'Warnings' }).getByText(/label "repo": field "repo\.name"/).waitFor();
  await assertAccessible(a, 'sources');
  await shot(a, 'source-test-warnings');
  await a.getByRole('button', { name: 'Create source' }).click();
  await a.getByRole('heading', { name: 'Your new source “github”' }).waitFor();
  const ingestURL = await a.getByLabel('Ingest URL', { exact: true }).inputValue();
  const ingestKey = await a.getByLabel('Ingest key', { exact: true }).inputValue();
  assert.ok(ingestURL.startsWith('http'), ingestURL);
  const curl = await a.getByLabel('curl command to push a first payload').textContent();
  assert.ok(curl.includes(ingestURL) && curl.includes(`Bearer ${ingestKey}`), curl);
  await shot(a, 'source-created');
  await a.getByRole('button', { name: 'I have saved the key' }).click();
  assert.ok(!(await a.content()).includes(ingestKey), 'the key is shown once');
  await a.getByLabel('Mapping').selectOption({ label: 'Source github' });
  await a.getByLabel('Sample payload (JSON)').fill('{"action": "opened", "repo": {"name": "web"}}');
  await a.getByRole('button', { name: 'Test the mapping' }).click();
  await a.getByText('✓ The mapping is complete').waitFor();
  await a.getByLabel('The event the source would store').getByText('"web: opened"').waitFor();
  await a.getByRole('row').filter({ hasText: 'github' }).waitFor();
  await shot(a, 'sources-list');

  // --- a member sees it all read-only -------------------------------------------------
  const b = await newPage();
  await signUp(b, 'dave@example.com');
  await nav.getByRole('link', { name: 'Members' }).click();
  await a.getByLabel('Email').fill('dave@example.com');
  await a.getByRole('button', { name: 'Invite' }).click();
  await a.getByRole('status').filter({ hasText: 'dave@example.com is now a member' }).waitFor();

  await b.goto(`${base}/projects/${projectID}/pipeline`);
  await b.getByRole('heading', { name: 'Pipeline', level: 1 }).waitFor();
  await b.getByText("You can see this pipeline; only the project's owner and admins change it.").waitFor();
  const bTrigger = b.getByRole('textbox', { name: 'Trigger' });
  assert.equal(await bTrigger.inputValue(), 'severity_number >= 17');
  assert.ok(!(await bTrigger.isEditable()), 'the trigger is read-only for a member');
  assert.ok(!(await b.getByRole('spinbutton', { name: 'Cooldown' }).isEditable()));
  assert.ok(await b.getByRole('radio', { name: /^Legacy/ }).isDisabled());
  assert.equal(await b.getByRole('button', { name: 'Save pipeline' }).count(), 0, 'no save for a member');
  assert.equal(await b.getByRole('button', { name: 'Add statement' }).count(), 0);
  assert.equal(await b.getByRole('button', { name: 'Reveal' }).count(), 0, 'the secret is not offered');
  await b.getByText("Only the project's owner and admins see the signing secret.").waitFor();
  assert.ok(!(await b.content()).includes(secret), 'the secret is not in the page');
  await assertAccessible(b, 'pipeline as a member');
  await shot(b, 'pipeline-as-member');
  await b.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Destinations' }).click();
  await b.getByRole('listitem', { name: /^Destination webhook/ }).waitFor();
  assert.equal(await b.getByRole('button', { name: /^Send a test message/ }).count(), 0, 'a member sends no tests');
  assert.equal(await b.getByRole('button', { name: 'Add destination' }).count(), 0);
  await shot(b, 'destinations-as-member');
  await b.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Push sources' }).click();
  await b.getByRole('row').filter({ hasText: 'github' }).waitFor();
  assert.equal(await b.getByRole('button', { name: 'Create source' }).count(), 0);
  assert.equal(await b.getByRole('button', { name: /^Delete source/ }).count(), 0);
  await shot(b, 'sources-as-member');

  // The owner deletes the source.
  await nav.getByRole('link', { name: 'Push sources' }).click();
  await a.getByRole('button', { name: 'Delete source github' }).click();
  await a.getByRole('dialog', { name: 'Delete source “github”?' }).getByRole('button', { name: 'Delete source' }).click();
  await a.getByText('No push sources yet.').waitFor();

  for (const p of [a, b]) assert.deepEqual(p.cspErrors, [], 'no script errors or CSP violations');
  console.log(`pages e2e: ok (${e2e.steps} screenshots in ${shots})`);
} finally {
  await browser.close();
}
