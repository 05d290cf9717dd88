// A small history-API router: the control plane answers index.html for every page path,
// so a reload or a shared link opens the same page.
import type { AnchorHTMLAttributes, ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

const listeners = new Set<() => void>();

/**
 * A page with unsaved edits asks before an in-app navigation leaves it (useLeaveGuard):
 * the guard gets the navigation to carry on with, and blocks it by returning true.
 */
type LeaveGuard = (proceed: () => void) => boolean;
let leaveGuard: LeaveGuard | null = null;

export function navigate(to: string, replace = false) {
  if (to === location.pathname) return;
  if (leaveGuard && leaveGuard(() => go(to, replace))) return;
  go(to, replace);
}

function go(to: string, replace: boolean) {
  if (to === location.pathname) return;
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  shown = to;
  listeners.forEach((l) => l());
}

// The browser's Back and Forward are guarded too: this listener is added when the module
// loads, before any page's (usePath's), so it can put the guarded page's address back and
// keep the others from hearing of the move until the user chose to leave.
let shown = location.pathname;
addEventListener('popstate', (e) => {
  const to = location.pathname;
  if (!leaveGuard || to === shown) {
    shown = to;
    return;
  }
  e.stopImmediatePropagation();
  history.pushState(null, '', shown);
  leaveGuard(() => go(to, false));
});

/**
 * While active, leaving the page asks first: in-app navigations call ask with the way to
 * carry on (the page shows its own dialog), and closing or reloading the tab gets the
 * browser's own "leave site?" prompt.
 */
export function useLeaveGuard(active: boolean, ask: (proceed: () => void) => void) {
  const askRef = useRef(ask);
  askRef.current = ask;
  useEffect(() => {
    if (!active) return;
    const guard: LeaveGuard = (proceed) => {
      askRef.current(() => {
        if (leaveGuard === guard) leaveGuard = null;
        proceed();
      });
      return true;
    };
    leaveGuard = guard;
    const onBeforeUnload = (e: BeforeUnloadEvent) => {
      e.preventDefault();
      e.returnValue = '';
    };
    addEventListener('beforeunload', onBeforeUnload);
    return () => {
      if (leaveGuard === guard) leaveGuard = null;
      removeEventListener('beforeunload', onBeforeUnload);
    };
  }, [active]);
}

export function usePath(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const update = () => setPath(location.pathname);
    listeners.add(update);
    addEventListener('popstate', update);
    return () => {
      listeners.delete(update);
      removeEventListener('popstate', update);
    };
  }, []);
  return path;
}

type LinkProps = AnchorHTMLAttributes<HTMLAnchorElement> & { href: string; children: ComponentChildren };

export function Link({ href, children, ...rest }: LinkProps) {
  const onClick = (e: MouseEvent) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(href);
  };
  return (
    <a href={href} onClick={onClick} {...rest}>
      {children}
    </a>
  );
}

/** Matches a pattern such as /projects/:id/keys; returns its parameters or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split('/');
  const s = path.replace(/\/+$/, '').split('/');
  if (p.length !== s.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i].startsWith(':')) {
      if (!s[i]) return null;
      params[p[i].slice(1)] = decodeURIComponent(s[i]);
    } else if (p[i] !== s[i]) return null;
  }
  return params;
}
