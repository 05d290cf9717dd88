// Email in a real browser, by role and label: the banner asking to confirm the address and
// the link that confirms it, inviting an address without an account (pending on Members,
// revocable), accepting an invitation into the project, a forgotten password reset by
// its link (which logs out every session), and a password change. Run by
// controlplane/dashboard_email_e2e_test.go against a real control plane sending to mailpit:
//   DASHBOARD_URL   the control plane (also its SVC_PUBLIC_URL, so mailed links open here)
//   MAILPIT_URL     mailpit's HTTP API, where the mail is read
//   SCREENSHOT_DIR  where each step is saved
import assert from 'node:assert/strict';
import { assertAccessible, launch, password } from './lib.mjs';

const base = process.env.DASHBOARD_URL;
const mailpit = process.env.MAILPIT_URL;
const shots = process.env.SCREENSHOT_DIR || 'test-output/email';
assert.ok(base && mailpit, 'DASHBOARD_URL and MAILPIT_URL must be set');
const { browser, shot, newPage, signUp } = await launch({ base, shots });

// mailedLink waits for a message to the address whose subject has subject and returns the
// link in it to page (the instance's own address).
async function mailedLink(to, subject, page) {
  for (let i = 0; i < 200; i++) {
    const res = await fetch(`${mailpit}/api/v1/search?query=${encodeURIComponent(`to:"${to}"`)}`);
    const { messages } = await res.json();
    const m = messages.find((m) => m.Subject.includes(subject));
    if (m) {
      const full = await (await fetch(`${mailpit}/api/v1/message/${m.ID}`)).json();
      const link = full.Text.match(new RegExp(`${base}/${page}\\?token=\\S+`));
      assert.ok(link, `no ${page} link in: ${full.Text}`);
      return link[0];
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`no mail to ${to} about "${subject}"`);
}

try {
  // --- signup: the banner, the mailed link confirms ------------------------------------
  const a = await newPage();
  await signUp(a, 'owner@example.com');
  const banner = a.getByRole('region', { name: 'Confirm your email address' });
  await banner.waitFor();
  assert.match(await banner.textContent(), /We sent a link to owner@example\.com/);
  await assertAccessible(a, 'projects with the banner');
  await shot(a, 'verify-banner');
  await a.goto(await mailedLink('owner@example.com', 'Confirm your email address', 'verify-email'));
  // Opening the link alone (as a mail scanner does) uses nothing: it takes a click.
  await a.getByRole('button', { name: 'Confirm my address' }).click();
  await a.getByRole('status').filter({ hasText: 'owner@example.com is confirmed.' }).waitFor();
  assert.equal(new URL(a.url()).search, '', 'the secret left the address bar');
  await shot(a, 'verified');
  await a.getByRole('link', { name: 'Go to your projects' }).click();
  await a.getByRole('heading', { name: 'Projects' }).waitFor();
  assert.equal(await banner.count(), 0, 'no banner once confirmed');

  // --- invite an address without an account; revoke another ---------------------------
  await a.getByLabel('Project name').fill('shop');
  await a.getByRole('button', { name: 'Create project' }).click();
  await a.getByRole('heading', { name: 'API keys' }).waitFor();
  const nav = a.getByRole('navigation', { name: 'Main' });
  await nav.getByRole('link', { name: 'Members' }).click();
  await a.getByRole('heading', { name: 'Members', level: 1 }).waitFor();
  await a.getByText('Someone without an account (or who has not confirmed their address) gets an invitation by email.').waitFor();
  for (const [email, role] of [['newbie@example.com', 'admin'], ['gone@example.com', 'member']]) {
    await a.getByLabel('Email').fill(email);
    await a.getByLabel('Role', { exact: true }).selectOption(role);
    await a.getByRole('button', { name: 'Invite' }).click();
    await a.getByRole('status').filter({ hasText: `Invitation sent to ${email}.` }).waitFor();
  }
  const pending = a.getByRole('table', { name: 'Pending invitations to shop' });
  await pending.getByRole('row', { name: /newbie@example\.com admin/ }).waitFor();
  await pending.getByRole('row', { name: /gone@example\.com member/ }).waitFor();
  const newbieRow = pending.getByRole('row', { name: /newbie@example\.com/ });
  assert.match(await newbieRow.textContent(), /owner@example\.com/, 'who invited');
  await assertAccessible(a, 'members with pending invitations');
  await shot(a, 'pending-invitations');
  await a.getByRole('button', { name: 'Resend the invitation to gone@example.com' }).click();
  await a.getByRole('status').filter({ hasText: 'A new invitation was sent to gone@example.com' }).waitFor();
  const goneLink = await mailedLink('gone@example.com', 'invited you to shop', 'invitation');
  await a.getByRole('button', { name: 'Revoke the invitation to gone@example.com' }).click();
  const dialog = a.getByRole('dialog', { name: 'Revoke the invitation to gone@example.com?' });
  await dialog.waitFor();
  await shot(a, 'revoke-dialog', false);
  await dialog.getByRole('button', { name: 'Revoke invitation' }).click();
  await a.getByRole('status').filter({ hasText: 'The invitation to gone@example.com was revoked' }).waitFor();
  assert.equal(await pending.getByRole('row', { name: /gone@example\.com/ }).count(), 0);

  // --- the invited open their link and join ---------------------------------------------
  const b = await newPage();
  await b.goto(goneLink);
  await b.getByRole('alert').filter({ hasText: 'This invitation link is unknown, used, revoked or expired' }).waitFor();
  await shot(b, 'revoked-link');
  const newbieLink = await mailedLink('newbie@example.com', 'invited you to shop', 'invitation');
  // Opened in a browser logged in as someone else, the page says accepting swaps the session.
  await a.goto(newbieLink);
  await a.getByRole('status').filter({ hasText: 'You are logged in as owner@example.com. Accepting logs you out of it and in as newbie@example.com.' }).waitFor();
  await shot(a, 'invitation-other-session');
  await a.goto(base + '/projects');
  await b.goto(newbieLink);
  await b.getByRole('heading', { name: 'Accept the invitation' }).waitFor();
  await b.getByText(/owner@example\.com invited you to shop as an admin, as newbie@example\.com/).waitFor();
  assert.equal(await b.getByText('You are logged in as').count(), 0, 'no session, no warning');
  await assertAccessible(b, 'invitation');
  await shot(b, 'invitation');
  await b.getByLabel('Choose a password').fill('newbie password 1');
  await b.getByRole('button', { name: 'Sign up and join' }).click();
  await b.getByRole('heading', { name: 'Recent events' }).waitFor();
  await b.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Members' }).click();
  await b.getByRole('row', { name: /newbie@example\.com\s*you/ }).waitFor();
  assert.equal(await b.getByLabel('Role of newbie@example.com').inputValue(), 'admin', 'joined with the role given');
  assert.equal(await b.getByRole('region', { name: 'Confirm your email address' }).count(), 0, 'the invitation confirmed the address');
  await shot(b, 'joined');

  // --- forgotten password: the link sets a new one and logs out every session -----------
  const c = await newPage();
  await c.goto(base + '/login');
  await c.getByRole('link', { name: 'Forgot your password?' }).click();
  await c.getByRole('heading', { name: 'Reset your password' }).waitFor();
  await c.getByLabel('Email').fill('owner@example.com');
  await c.getByRole('button', { name: 'Email me a link' }).click();
  await c.getByRole('status').filter({ hasText: 'If owner@example.com has an account, a link to set a new password is on its way.' }).waitFor();
  await shot(c, 'reset-asked');
  await c.goto(await mailedLink('owner@example.com', 'Reset your password', 'reset-password'));
  await c.getByRole('heading', { name: 'Set a new password' }).waitFor();
  await c.getByLabel('New password').fill('owner password 2');
  await c.getByRole('button', { name: 'Set password' }).click();
  await c.getByRole('status').filter({ hasText: 'Your password is changed, and every session of your account was logged out.' }).waitFor();
  await shot(c, 'reset-done');
  // The owner's first browser was logged out by the reset.
  await a.reload();
  await a.getByRole('heading', { name: 'Log in' }).waitFor();
  await a.getByLabel('Email').fill('owner@example.com');
  await a.getByLabel('Password').fill(password);
  await a.getByRole('button', { name: 'Log in' }).click();
  await a.getByRole('alert').filter({ hasText: 'Wrong email or password.' }).waitFor();
  await a.getByLabel('Password').fill('owner password 2');
  await a.getByRole('button', { name: 'Log in' }).click();
  await a.getByRole('navigation', { name: 'Main' }).waitFor();

  // --- change while logged in: the current one is needed; this browser stays in ---------
  await a.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Password' }).click();
  await a.getByRole('heading', { name: 'Change your password' }).waitFor();
  await a.getByLabel('Current password').fill('not it');
  await a.getByLabel('New password').fill('owner password 3');
  await a.getByRole('button', { name: 'Change password' }).click();
  await a.getByRole('alert').filter({ hasText: 'The current password is wrong.' }).waitFor();
  await a.getByLabel('Current password').fill('owner password 2');
  await a.getByRole('button', { name: 'Change password' }).click();
  await a.getByRole('status').filter({ hasText: 'Your password is changed.' }).waitFor();
  await assertAccessible(a, 'password');
  await shot(a, 'password-changed');
  await a.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'All projects' }).click();
  await a.getByRole('heading', { name: 'Projects' }).waitFor();
  await a.getByRole('link', { name: 'shop' }).first().waitFor();

  for (const p of [a, b, c]) assert.deepEqual(p.cspErrors, [], 'no script or CSP errors');
  console.log('email e2e: ok');
} finally {
  await browser.close();
}
