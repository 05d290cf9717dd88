// Where the log-in page sends the user back to: only a path on this origin, so that a
// link such as /login?next=//evil.example cannot turn the log-in page into an open
// redirect. The URL parser has the last word because browsers read "/\evil.example" and
// "/\t/evil.example" as other hosts.

export function safeNext(raw: string | null | undefined): string | null {
  if (!raw || raw[0] !== '/' || raw[1] === '/' || raw[1] === '\\') return null;
  let u: URL;
  try {
    u = new URL(raw, location.origin);
  } catch {
    return null;
  }
  if (u.origin !== location.origin) return null;
  return u.pathname + u.search + u.hash;
}

/** The page to return to after logging in, from the current address's ?next=. */
export function currentNext(): string | null {
  return safeNext(new URLSearchParams(location.search).get('next'));
}

/** The log-in (or sign-up) address that comes back to next. */
export function withNext(path: '/login' | '/signup', next: string | null): string {
  return next ? `${path}?next=${encodeURIComponent(next)}` : path;
}
