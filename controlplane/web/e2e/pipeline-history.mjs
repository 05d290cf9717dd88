// The Pipeline page's warnings, unsaved-edits prompt and history
// in a real browser, by role and label. Run by
// controlplane/dashboard_pipeline_history_e2e_test.go against a real control plane and a
// receiver collector (which answers the pipeline checks from the project's records):
//   DASHBOARD_URL   the control plane
//   RECEIVER_URL    the receiver
//   SCREENSHOT_DIR  where each step is saved
import assert from 'node:assert/strict';
import { assertAccessible, launch } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const receiver = process.env.RECEIVER_URL;
const shots = process.env.SCREENSHOT_DIR || 'test-output/pipeline-history';
assert.ok(base && receiver, 'DASHBOARD_URL and RECEIVER_URL must be set');
const e2e = await launch({ base, shots });
const { browser, shot, newPage, signUp } = e2e;

// sendEvent posts one event, retrying while the receiver does not know the new key yet.
async function sendEvent(key, body) {
  for (let i = 0; i < 100; i++) {
    const res = await fetch(`${receiver}/v1/events`, {
      method: 'POST',
      headers: { 'X-API-Key': key, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (res.status === 202) return;
    assert.equal(res.status, 401, `the receiver answered ${res.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail('the receiver never took the new key');
}

try {
  const a = await newPage();
  await signUp(a, 'hist@example.com');
  await a.getByLabel('Project name').fill('checkout');
  await a.getByRole('button', { name: 'Create project' }).click();
  await a.getByRole('heading', { name: 'API keys' }).waitFor();
  await a.getByLabel('Key name').fill('ci');
  await a.getByRole('button', { name: 'Create key' }).click();
  const key = await a.getByLabel('New API key').inputValue();
  for (let i = 0; i < 3; i++) await sendEvent(key, { severityNumber: 17 + i, service: 'checkout' });
  const nav = a.getByRole('navigation', { name: 'Main' });

  // --- a misspelt field: a warning at its place, in amber, and Save still works ---------
  await nav.getByRole('link', { name: 'Pipeline' }).click();
  await a.getByRole('heading', { name: 'Pipeline', level: 1 }).waitFor();
  await a.getByText(/^Version 1, saved/).waitFor();
  const trigger = a.getByRole('textbox', { name: 'Trigger' });
  await trigger.fill('service == "checkout" and severty_number >= 17');
  const warning = a.getByText('Warning at line 1, column 27:');
  await warning.waitFor();
  const box = a.locator('.problem-warning');
  assert.match(await box.textContent(), /No field named severty_number in the project's last 3 records; did you mean severity_number\?/);
  assert.equal(await a.locator('.problem-snippet').textContent(), 'service == "checkout" and severty_number >= 17\n' + ' '.repeat(26) + '^',
    'the caret is under the field');
  const colour = await box.evaluate((el) => getComputedStyle(el).borderLeftColor);
  assert.equal(colour, 'rgb(214, 158, 0)', 'a warning is amber, not the red of an error');
  assert.notEqual(await trigger.getAttribute('aria-invalid'), 'true', 'a warning does not mark the field invalid');
  const described = await trigger.evaluate((el) => el.getAttribute('aria-describedby').split(' ')
    .map((id) => document.getElementById(id)?.textContent ?? '').join(' '));
  assert.match(described, /Warning at line 1, column 27/, 'the warning is the field description');
  await a.getByRole('status').filter({ hasText: '1 warning to look at' }).waitFor();
  await assertAccessible(a, 'pipeline with a warning');
  await shot(a, 'pipeline-warning');
  const save = a.getByRole('button', { name: 'Save pipeline' });
  assert.equal(await save.isEnabled(), true, 'a warning does not block saving');
  await save.click();
  await a.getByRole('status').filter({ hasText: 'Saved: collectors use it now' }).waitFor();
  await a.getByText(/^Version 2, saved .* by hist@example\.com/).waitFor();
  await a.getByText('Warning at line 1, column 27:').waitFor(); // the save's answer warns too

  // --- unsaved edits: leaving asks; Stay keeps the edit; Leave goes --------------------
  await trigger.fill('severity_number >= 20');
  await a.getByRole('status').filter({ hasText: 'Valid, not saved yet' }).waitFor();
  await nav.getByRole('link', { name: 'Deliveries' }).click();
  const dialog = a.getByRole('dialog', { name: 'Leave without saving?' });
  await dialog.waitFor();
  await shot(a, 'leave-prompt', false);
  await dialog.getByRole('button', { name: 'Stay' }).click();
  await dialog.waitFor({ state: 'hidden' });
  assert.match(new URL(a.url()).pathname, /\/pipeline$/, 'Stay keeps the page');
  assert.equal(await trigger.inputValue(), 'severity_number >= 20', 'Stay keeps the edit');
  // The browser's Back asks too, and Stay keeps the page and the edit.
  await a.evaluate(() => history.back());
  await dialog.waitFor();
  await dialog.getByRole('button', { name: 'Stay' }).click();
  await dialog.waitFor({ state: 'hidden' });
  assert.match(new URL(a.url()).pathname, /\/pipeline$/, 'Stay after Back keeps the page');
  assert.equal(await trigger.inputValue(), 'severity_number >= 20', 'Stay after Back keeps the edit');
  await nav.getByRole('link', { name: 'Fields' }).click();
  await dialog.waitFor();
  await dialog.getByRole('button', { name: 'Leave without saving' }).click();
  await a.getByRole('heading', { name: 'Fields', level: 1 }).waitFor();
  assert.match(new URL(a.url()).pathname, /\/fields$/);

  // --- history: compare version 1 with the current one, restore it as version 3 ------
  await nav.getByRole('link', { name: 'Pipeline' }).click();
  await a.getByText(/^Version 2, saved/).waitFor();
  assert.equal(await trigger.inputValue(), 'service == "checkout" and severty_number >= 17', 'the edit was dropped on leaving');
  await a.getByText('Warning at line 1, column 27:').waitFor(); // the saved pipeline's warning shows on arrival
  await a.getByRole('button', { name: 'History' }).click();
  const list = a.getByRole('list', { name: 'Pipeline versions' });
  await list.getByText('Version 2').waitFor();
  assert.match(await list.locator('li').nth(0).textContent(), /Version 2.*current.*saved by hist@example\.com/);
  assert.match(await list.locator('li').nth(1).textContent(), /Version 1.*saved by hist@example\.com/);
  await a.getByRole('button', { name: 'Compare version 1 with the current pipeline' }).click();
  const diff = a.getByRole('table', { name: 'Differences' });
  await diff.waitFor();
  const removed = await diff.locator('.diff-del').allTextContents();
  const added = await diff.locator('.diff-add').allTextContents();
  assert.deepEqual(removed.map((t) => t.replace(/^removed: - /, '')), ['trigger: ']);
  assert.deepEqual(added.map((t) => t.replace(/^added: \+ /, '')), ['trigger: service == "checkout" and severty_number >= 17']);
  await assertAccessible(a, 'history');
  await shot(a, 'history-diff');
  await a.getByRole('button', { name: 'Restore version 1' }).click();
  const confirm = a.getByRole('dialog', { name: 'Restore version 1?' });
  await confirm.getByText('saved as a new version 3').waitFor();
  await shot(a, 'restore-confirm', false);
  await confirm.getByRole('button', { name: 'Restore version' }).click();
  await confirm.waitFor({ state: 'hidden' });
  await a.getByText(/^Version 3, saved .* by hist@example\.com/).waitFor();
  assert.equal(await trigger.inputValue(), '', 'the restored pipeline is version 1\'s');
  await list.getByText('(restored version 1)').waitFor();
  assert.match(await list.locator('li').nth(0).textContent(), /Version 3.*current/);
  await shot(a, 'restored');

  assert.deepEqual(a.cspErrors, [], 'no script errors');
  console.log(`pipeline history browser test passed: ${e2e.steps} screenshots in ${shots}`);
} finally {
  await browser.close();
}
