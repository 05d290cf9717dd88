// In the browser: after the receiver refused events for the account's
// monthly limit, the Usage pages say since when it refuses, what to do, how many events
// were refused and why, and that a request is refused whole; every other project page
// shows a banner linking to Usage. Run by controlplane/usage_refused_e2e_test.go, which
// sets the limit to 100 and has batches of 30 refused with 10 events left.
import assert from 'node:assert/strict';
import { assertAccessible, launch, password } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const shots = process.env.SCREENSHOT_DIR;
const email = process.env.OWNER_EMAIL;
const memberEmail = process.env.MEMBER_EMAIL;
const shop = process.env.SHOP_ID;
const blog = process.env.BLOG_ID;
const refused = Number(process.env.REFUSED);
const fmt = new Intl.NumberFormat('en-US');

const { browser, shot, newPage } = await launch({ base, shots });

async function logIn(page, who) {
  await page.goto(base + '/login');
  await page.getByRole('heading', { name: 'Log in' }).waitFor();
  await page.getByLabel('Email').fill(who);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Projects' }).waitFor();
}

try {
  const page = await newPage();
  await logIn(page, email);

  // --- the account's Usage: refusing since, what to do, the refused count -----------
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Account usage' }).click();
  await page.getByRole('heading', { name: 'Usage', exact: true }).waitFor();
  const refusing = page.getByRole('alert').filter({ hasText: 'Refusing since' });
  await refusing.waitFor();
  const text = (await refusing.textContent()).replace(/\s+/g, ' ');
  assert.match(text, /90 of 100 events this month \(90%\)/, text);
  assert.match(text, /more than the 10 events left are refused whole \(429 quota_exceeded\)/, text);
  assert.match(text, /Wait until the count resets on \d{4}-\d\d-\d\d/, 'the reset date, written in full: ' + text);
  assert.match(text, /accounts set-limit/, 'what exists to raise the limit: ' + text);
  assert.doesNotMatch(text, /Warning:/, 'no yellow 90% warning while refusing');
  assert.equal(await page.getByRole('status').filter({ hasText: 'Warning:' }).count(), 0, 'no yellow warning beside the red alert');
  const colour = await refusing.evaluate((el) => getComputedStyle(el).color);
  assert.match(colour, /rgb\((\d+), (\d+), (\d+)\)/);
  const [r, g, b] = colour.match(/\d+/g).map(Number);
  assert.ok(r > g * 2 && r > b * 2, `refusing is said in red, not ${colour}`);

  const panel = page.getByRole('region', { name: 'Refused this month' });
  await panel.getByText(`${fmt.format(refused)} events refused`).waitFor();
  const quotaRow = panel.getByRole('row').filter({ hasText: 'Monthly limit reached (429 quota_exceeded)' });
  assert.equal((await quotaRow.getByRole('cell').nth(1).textContent()).trim(), fmt.format(refused));
  // Where the limit is read: a request is accepted or refused whole.
  await page.getByRole('region', { name: /Events in / }).getByText('A request is accepted or refused whole').waitFor();
  const shopRow = page.getByRole('region', { name: 'By project' }).getByRole('row').filter({ hasText: 'shop' });
  assert.equal((await shopRow.getByRole('cell').nth(2).textContent()).trim(), fmt.format(refused), 'the shop refused them');
  const blogRow = page.getByRole('region', { name: 'By project' }).getByRole('row').filter({ hasText: 'blog' });
  assert.equal((await blogRow.getByRole('cell').nth(2).textContent()).trim(), '0', 'the blog refused none');
  assert.equal(await page.getByRole('alert', { name: 'Events refused' }).count(), 0, 'no project banner outside a project');
  await assertAccessible(page, 'account usage');
  await shot(page, 'account-usage-refusing');

  // --- a project page: the banner, with a link to Usage ----------------------------
  await page.goto(`${base}/projects/${shop}/pipeline`);
  await page.getByRole('heading', { name: 'Pipeline', exact: true }).waitFor();
  const banner = page.getByRole('alert', { name: 'Events refused' });
  await banner.waitFor();
  assert.match((await banner.textContent()).replace(/\s+/g, ' '), /Events are being refused since .*429 quota_exceeded.*until the count resets on/);
  await shot(page, 'pipeline-banner');
  await banner.getByRole('link', { name: 'See Usage' }).click();
  await page.getByRole('heading', { name: 'Usage', exact: true }).waitFor();
  await page.getByRole('alert').filter({ hasText: 'Refusing since' }).waitFor();
  assert.equal(await page.getByRole('alert', { name: 'Events refused' }).count(), 0, 'the Usage page says it itself, once');
  await page.getByRole('region', { name: 'Refused this month' }).getByText(`${fmt.format(refused)} events refused from this project`).waitFor();
  await shot(page, 'project-usage-refusing');

  // Another project of the same account: its events are refused too, so the banner shows;
  // it refused none itself.
  await page.goto(`${base}/projects/${blog}/deliveries`);
  await page.getByRole('alert', { name: 'Events refused' }).waitFor();
  await shot(page, 'other-project-banner');
  await page.goto(`${base}/projects/${blog}/usage`);
  await page.getByRole('region', { name: 'Refused this month' }).getByText('No events refused from this project this month.').waitFor();

  // A member (not the owner) sees the banner and, on Usage, since when and what to do.
  const m = await newPage();
  await logIn(m, memberEmail);
  await m.goto(`${base}/projects/${shop}/keys`);
  await m.getByRole('alert', { name: 'Events refused' }).waitFor();
  await m.goto(`${base}/projects/${shop}/usage`);
  const mAlert = m.getByRole('alert').filter({ hasText: 'Refusing since' });
  await mAlert.waitFor();
  assert.match((await mAlert.textContent()).replace(/\s+/g, ' '), /account that owns this project has reached its monthly limit/);
  await shot(m, 'member-usage-refusing');
  assert.deepEqual(page.cspErrors.filter((e) => !/receiver|CORS|fetch/i.test(e)), [], 'no script errors');
  console.log('usage-refused: ok');
} finally {
  await browser.close();
}
