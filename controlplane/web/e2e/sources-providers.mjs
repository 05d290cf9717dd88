// Push sources set up from their sender, by role and label: a GitHub source shows its
// webhook secret once, with what to paste where in GitHub, and not after a reload; an
// Alertmanager source's receiver YAML holds its URL and Basic credentials, which the
// receiver takes (the sample's two alerts: two records); Testing the Alertmanager sample
// shows one event per alert; a GitHub signature over the sample checks
// out with the secret shown and not with a wrong one; rotating the secret shows a new one
// once and the old one no longer signs; a Stripe source is created before Stripe shows
// its secret, refuses calls until it is pasted back, then takes Stripe-signed ones. Run by
// controlplane/dashboard_sources_providers_e2e_test.go (TestDashboardSourcesProviders):
//   DASHBOARD_URL   the control plane
//   SCREENSHOT_DIR  where each visited page is saved
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { assertAccessible, launch } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const shots = process.env.SCREENSHOT_DIR || 'test-output/sources-providers';
assert.ok(base, 'DASHBOARD_URL must be set');
const { browser, shot, newPage, signUp } = await launch({ base, shots });

const githubSignature = (secret, body) => 'sha256=' + createHmac('sha256', secret).update(body).digest('hex');

try {
  const a = await newPage();
  await signUp(a, 'olga@example.com');
  await a.getByLabel('Project name').fill('platform');
  await a.getByRole('button', { name: 'Create project' }).click();
  await a.getByRole('heading', { name: 'API keys' }).waitFor();
  const nav = a.getByRole('navigation', { name: 'Main' });
  await nav.getByRole('link', { name: 'Push sources' }).click();
  await a.getByRole('heading', { name: 'Push sources', level: 1 }).waitFor();
  const senders = a.getByRole('group', { name: 'Sender' });
  for (const name of ['GitHub', 'Stripe', 'Alertmanager', 'Grafana', 'Sentry', 'PagerDuty', 'CloudEvents', 'Slack', 'Other']) {
    await senders.getByRole('radio', { name, exact: true }).waitFor();
  }
  await assertAccessible(a, 'sources');
  await shot(a, 'senders', false);

  // --- GitHub: the secret once, with the steps in GitHub's words ------------------------
  await senders.getByRole('radio', { name: 'GitHub', exact: true }).check();
  assert.equal(await a.getByLabel('Source name').inputValue(), 'github', 'the sender names the source');
  await shot(a, 'github-form', false);
  await a.getByRole('button', { name: 'Create source' }).click();
  await a.getByRole('heading', { name: 'Your new source “github”' }).waitFor();
  await a.getByText('you will not see it again').waitFor();
  const githubURL = await a.getByLabel('Ingest URL', { exact: true }).inputValue();
  const secret = await a.getByLabel('Secret', { exact: true }).first().inputValue();
  assert.match(githubURL, /\/ingest\/in_[0-9a-f]{32}$/);
  assert.match(secret, /^[0-9a-f]{64}$/, 'a generated GitHub secret');
  const steps = a.getByRole('list', { name: 'Set up GitHub' });
  assert.equal(await steps.getByLabel('Payload URL', { exact: true }).textContent(), githubURL);
  assert.equal(await steps.getByLabel('Content type', { exact: true }).textContent(), 'application/json');
  assert.equal(await steps.getByLabel('Secret', { exact: true }).textContent(), secret);
  await steps.getByText('Let me select individual events').waitFor();
  await assertAccessible(a, 'github created');
  await shot(a, 'github-created');
  await a.getByRole('button', { name: 'I have saved the secret' }).click();
  await a.reload();
  const githubRow = a.getByRole('row').filter({ hasText: 'github' });
  await githubRow.getByText('GitHub signature').waitFor();
  assert.ok(!(await a.content()).includes(secret), 'the secret is gone after a reload');

  // --- Alertmanager: the receiver YAML with URL and Basic credentials -------------------
  await senders.getByRole('radio', { name: 'Alertmanager', exact: true }).check();
  assert.equal(await a.getByLabel('Source name').inputValue(), 'alertmanager');
  assert.equal(await a.getByLabel('Username').inputValue(), 'alertmanager');
  await a.getByRole('button', { name: 'Create source' }).click();
  await a.getByRole('heading', { name: 'Your new source “alertmanager”' }).waitFor();
  const amURL = await a.getByLabel('Ingest URL', { exact: true }).inputValue();
  const password = await a.getByLabel('Password', { exact: true }).inputValue();
  assert.ok(password.length >= 16, 'a generated password');
  const yaml = await a.getByLabel('Alertmanager receiver (YAML)').textContent();
  assert.ok(yaml.includes('webhook_configs:'), yaml);
  assert.ok(yaml.includes(`url: '${amURL}'`), yaml);
  assert.ok(yaml.includes("username: 'alertmanager'") && yaml.includes(`password: '${password}'`), yaml);
  await assertAccessible(a, 'alertmanager created');
  await shot(a, 'alertmanager-created');
  const firstDelivery = a.getByRole('status', { name: 'First delivery' });
  await firstDelivery.getByText('Waiting for the first delivery from Alertmanager').waitFor();

  // The YAML's URL and credentials are what the receiver takes: Alertmanager's sample
  // becomes one record per alert, and another password stores nothing.
  const sample = await a.getByLabel('Sample payload (JSON)').inputValue();
  const basic = (user, pass) => 'Basic ' + Buffer.from(`${user}:${pass}`).toString('base64');
  const push = (auth) => fetch(amURL, { method: 'POST', body: sample,
    headers: { 'Content-Type': 'application/json', Authorization: auth, 'User-Agent': 'Alertmanager/0.27.0' } });
  let res;
  // The receivers learn of a new source within a second (the configuration mirror).
  for (let i = 0; i < 50; i++) {
    res = await push(basic('alertmanager', password));
    if (res.status !== 404) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(res.status, 202, await res.clone().text());
  assert.deepEqual(await res.json(), { accepted: 2 }, 'one record per alert');
  res = await push(basic('alertmanager', password + 'x'));
  assert.equal(res.status, 401);
  assert.equal((await res.json()).error.code, 'signature_invalid');
  // The page sees it arrive.
  await firstDelivery.getByText('✓ First delivery received').waitFor({ timeout: 20_000 });
  await firstDelivery.getByText(/alert\.(firing|resolved)/).waitFor();
  await assertAccessible(a, 'first delivery');
  await shot(a, 'alertmanager-first-delivery', false);
  await a.getByRole('button', { name: 'I have saved the password' }).click();

  // --- Test: the Alertmanager sample is one event per alert -----------------------------
  await a.getByLabel('Mapping').selectOption({ label: 'Source alertmanager' });
  assert.ok((await a.getByLabel('Sample payload (JSON)').inputValue()).includes('"alerts"'), 'the Alertmanager sample');
  await a.getByRole('button', { name: 'Test the mapping' }).click();
  await a.getByText('It would store 2 events').waitFor();
  const events = a.getByRole('list', { name: 'Events the source would store' });
  assert.equal(await events.getByRole('listitem').count(), 2);
  await events.getByText('alert.firing', { exact: true }).waitFor();
  await events.getByText('alert.resolved', { exact: true }).waitFor();
  await assertAccessible(a, 'alertmanager test');
  await shot(a, 'alertmanager-test');

  // --- Stripe: it shows its signing secret only once it has the URL ---------------------
  // So the source is created without one (every call refused, saying so), then the
  // secret Stripe reveals is pasted back, and Stripe's signed calls are stored.
  await senders.getByRole('radio', { name: 'Stripe', exact: true }).check();
  const create = a.getByRole('button', { name: 'Create source' });
  assert.equal(await a.getByLabel('Signing secret (optional now)').inputValue(), '');
  await shot(a, 'stripe-form', false);
  await create.click();
  await a.getByRole('heading', { name: 'Your new source “stripe”' }).waitFor();
  const stripeSteps = a.getByRole('list', { name: 'Set up Stripe' });
  const stripeURL = await a.getByLabel('Ingest URL', { exact: true }).inputValue();
  assert.equal(await stripeSteps.getByLabel('Payload URL', { exact: true }).textContent(), stripeURL);
  await stripeSteps.getByText('paste it back here.').waitFor();
  assert.ok(!(await a.content()).includes('Copy the key now'), 'no key to copy: the panel shows none');
  const stripeRow = a.getByRole('row').filter({ hasText: 'stripe' });
  await stripeRow.getByText('no secret yet: calls are refused').waitFor();
  await assertAccessible(a, 'stripe created');
  await shot(a, 'stripe-created');

  const stripeSecret = 'whsec_' + 'a1b2c3d4'.repeat(4);
  const stripeBody = JSON.stringify({ id: 'evt_1PaSte', object: 'event', type: 'invoice.paid', created: 1714564800,
    data: { object: { id: 'in_1', object: 'invoice', amount_paid: 4200 } } });
  // As stripe-go's webhook.GenerateTestSignedPayload and Stripe itself sign: v1 is
  // HMAC-SHA256 over "<t>.<body>" keyed with the whole whsec_ string.
  const stripeSigned = (secret) => {
    const t = Math.floor(Date.now() / 1000);
    return `t=${t},v1=${createHmac('sha256', secret).update(`${t}.${stripeBody}`).digest('hex')}`;
  };
  const pushStripe = () => fetch(stripeURL, { method: 'POST', body: stripeBody,
    headers: { 'Content-Type': 'application/json', 'Stripe-Signature': stripeSigned(stripeSecret) } });
  let refused;
  for (let i = 0; i < 50; i++) {
    refused = await pushStripe();
    if (refused.status !== 404) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(refused.status, 401, 'refused before the secret is set, however it is signed');
  const refusal = (await refused.json()).error;
  assert.equal(refusal.code, 'signature_invalid');
  assert.match(refusal.message, /signing secret has not been set yet.*rotate-secret.*; nothing was stored$/);

  await a.getByLabel('Signing secret from Stripe').fill(stripeSecret);
  await shot(a, 'stripe-paste', false);
  await a.getByRole('button', { name: 'Save the secret' }).click();
  await stripeSteps.getByText('set: the source checks every Stripe-Signature with it.').waitFor();
  await stripeRow.getByText('no secret yet: calls are refused').waitFor({ state: 'detached' });
  assert.ok(!(await a.content()).includes('a1b2c3d4a1b2'), 'a pasted secret is not shown back');
  await assertAccessible(a, 'stripe secret pasted');
  await shot(a, 'stripe-pasted');
  let accepted;
  // The receivers take the new secret within a second.
  for (let i = 0; i < 50; i++) {
    accepted = await pushStripe();
    if (accepted.status !== 401) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(accepted.status, 202, await accepted.clone().text());
  assert.deepEqual(await accepted.json(), { accepted: 1 });
  await a.getByRole('status', { name: 'First delivery' }).getByText('✓ First delivery received').waitFor({ timeout: 20_000 });
  await shot(a, 'stripe-first-delivery', false);
  await a.getByRole('button', { name: 'Done' }).click();

  // --- CloudEvents: a URL token, which the ingest URL holds only in the create answer ---
  await senders.getByRole('radio', { name: 'CloudEvents', exact: true }).check();
  await create.click();
  await a.getByRole('heading', { name: 'Your new source “cloudevents”' }).waitFor();
  const ceURL = await a.getByLabel('Ingest URL', { exact: true }).inputValue();
  const token = await a.getByLabel('URL token', { exact: true }).inputValue();
  assert.ok(ceURL.endsWith('/' + token), `${ceURL} ends with the token`);
  await a.getByRole('list', { name: 'Set up CloudEvents' }).getByText('application/cloudevents-batch+json').waitFor();
  await shot(a, 'cloudevents-created');
  await a.getByRole('button', { name: 'I have saved the URL token' }).click();
  const ceRow = a.getByRole('row').filter({ hasText: 'cloudevents' });
  await ceRow.getByText('+ the token shown once').waitFor();
  assert.ok(!(await a.content()).includes(token), 'the token is gone from the page');
  await a.getByLabel('Mapping').selectOption({ label: 'Source cloudevents' });
  await a.getByLabel('URL token (optional)').fill(token);
  await a.getByRole('button', { name: 'Test the mapping' }).click();
  await a.getByRole('status', { name: 'Verification' }).getByText('✓ Verified:').waitFor();
  await a.getByLabel('The event the source would store').getByText('"com.example.order.created"').first().waitFor();
  await shot(a, 'cloudevents-test');

  // --- Test: GitHub's signature, right and wrong ----------------------------------------
  await a.getByLabel('Mapping').selectOption({ label: 'Source github' });
  const payload = await a.getByLabel('Sample payload (JSON)').inputValue();
  assert.ok(payload.includes('"pull_request"'), 'the GitHub sample');
  const headers = a.getByLabel('Request headers (optional)');
  const base_ = await headers.inputValue();
  assert.ok(base_.includes('X-GitHub-Event: pull_request'), base_);
  await headers.fill(`${base_}\nX-Hub-Signature-256: ${githubSignature(secret, payload)}`);
  await a.getByRole('button', { name: 'Test the mapping' }).click();
  await a.getByRole('status', { name: 'Verification' }).getByText('✓ Verified:').waitFor();
  await a.getByLabel('The event the source would store').getByText('"pull_request.opened"').waitFor();
  await shot(a, 'github-signature-ok');
  await headers.fill(`${base_}\nX-Hub-Signature-256: ${githubSignature('not-the-secret', payload)}`);
  await a.getByRole('button', { name: 'Test the mapping' }).click();
  await a.getByRole('status', { name: 'Verification' }).getByText('✗ Not verified:').waitFor();
  await shot(a, 'github-signature-bad');

  // --- Rotate: confirmed, a new secret once, the old one no longer signs ----------------
  await a.getByRole('button', { name: 'Rotate the secret of github' }).click();
  const dialog = a.getByRole('dialog', { name: 'Rotate the secret of “github”?' });
  await dialog.getByText('stops working within a second').waitFor();
  await shot(a, 'rotate-confirm', false);
  await dialog.getByRole('button', { name: 'Rotate secret' }).click();
  await a.getByRole('heading', { name: 'New secret for “github”' }).waitFor();
  const rotated = await a.getByLabel('Secret', { exact: true }).first().inputValue();
  assert.match(rotated, /^[0-9a-f]{64}$/);
  assert.notEqual(rotated, secret, 'a new secret');
  await assertAccessible(a, 'rotated');
  await shot(a, 'rotated');
  await a.getByRole('button', { name: 'I have saved the secret' }).click();
  await headers.fill(`${base_}\nX-Hub-Signature-256: ${githubSignature(secret, payload)}`);
  await a.getByRole('button', { name: 'Test the mapping' }).click();
  await a.getByRole('status', { name: 'Verification' }).getByText('✗ Not verified:').waitFor();
  await headers.fill(`${base_}\nX-Hub-Signature-256: ${githubSignature(rotated, payload)}`);
  await a.getByRole('button', { name: 'Test the mapping' }).click();
  await a.getByRole('status', { name: 'Verification' }).getByText('✓ Verified:').waitFor();
  await shot(a, 'sources-list');

  assert.deepEqual(a.cspErrors, [], 'no script errors');
  console.log('sources-providers: ok');
} finally {
  await browser.close();
}
