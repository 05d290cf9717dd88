// What the browser tests (dashboard.mjs, pages.mjs, console.mjs) share: Debian's chromium
// through playwright-core, numbered screenshots, the accessibility check, pages that record
// script errors, and signing up. One copy, so that a fix to a flag or a check reaches every
// test.
import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';

export const password = 'correct horse battery';
export const timeout = 10_000;

// launch starts the browser for a test against the control plane at base, saving
// screenshots into shots. Its functions close over this browser, so they may be taken
// out of the object; steps counts the screenshots taken so far.
export async function launch({ base, shots, viewport = { width: 1280, height: 800 } }) {
  mkdirSync(shots, { recursive: true });
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--no-first-run'],
  });
  let step = 0;

  async function shot(page, name, fullPage = true) {
    step++;
    await page.screenshot({ path: `${shots}/${String(step).padStart(2, '0')}-${name}.png`, fullPage });
  }

  async function newPage() {
    const context = await browser.newContext({ viewport });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
    const page = await context.newPage();
    page.setDefaultTimeout(timeout);
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    // Refused API calls (a 401 before logging in, a 404 asked for) are logged by the browser
    // as errors too; what must not happen is a script error or a CSP refusal.
    page.on('console', (m) => m.type() === 'error' && !/Failed to load resource/.test(m.text()) && errors.push(m.text()));
    page.cspErrors = errors;
    return page;
  }

  // signUp creates an account and waits for its Projects page. fromLogin takes the way a
  // newcomer does, from the log-in page's link, instead of opening /signup.
  async function signUp(page, email, { fromLogin = false } = {}) {
    if (fromLogin) {
      await page.goto(base + '/');
      await page.getByRole('heading', { name: 'Log in' }).waitFor();
      await page.getByRole('link', { name: 'Create an account' }).click();
    } else {
      await page.goto(base + '/signup');
    }
    await page.getByRole('heading', { name: 'Create your account' }).waitFor();
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign up' }).click();
    await page.getByRole('heading', { name: 'Projects' }).waitFor();
  }

  return {
    browser,
    shot,
    newPage,
    signUp,
    get steps() {
      return step;
    },
  };
}

// Every input has a label and every button a name: what a screen reader announces.
export async function assertAccessible(page, where) {
  const problems = await page.evaluate(() => {
    const out = [];
    for (const el of document.querySelectorAll('input, select, textarea')) {
      if (el.type === 'hidden' || el.closest('dialog:not([open])')) continue;
      if (!(el.labels && el.labels.length) && !el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby')) {
        out.push(`unlabelled ${el.tagName.toLowerCase()} ${el.name || ''}`);
      }
    }
    for (const el of document.querySelectorAll('button')) {
      if (el.closest('dialog:not([open])')) continue;
      if (!(el.getAttribute('aria-label') || el.textContent.trim())) out.push('a button without a name');
    }
    return out;
  });
  assert.deepEqual(problems, [], `${where}: ${problems.join(', ')}`);
}
