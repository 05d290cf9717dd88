// The pages' async state in one place: a list loaded on mount, an action with busy and
// error, and a removal asked about in a ConfirmDialog first. Written by hand: preact has no
// data-fetching hooks, and a library for three small hooks would outweigh them.
import { useEffect, useRef, useState } from 'preact/hooks';

/**
 * Loads on mount and whenever deps change. reload() never rejects: a failure lands in
 * error, so callers may await it inside an action without their own catch. A later
 * success keeps the earlier error, as the pages always did.
 */
export function useLoad<T>(fetcher: () => Promise<T>, deps: unknown[]) {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<unknown>(null);
  // The latest fetcher, so a reload after a prop change asks for the current project.
  const latest = useRef(fetcher);
  latest.current = fetcher;
  const reload = () => latest.current().then(setData, setError);
  useEffect(() => {
    reload();
  }, deps);
  return { data, error, reload };
}

/** A user's action: busy while it runs (to disable its button), its error to show. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = async (fn: () => Promise<unknown>) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, setError, run };
}

/**
 * Removing an item after a ConfirmDialog: ask(item) opens it with no stale error,
 * remove(item) runs on confirm, and the dialog closes on success before after(item)
 * (a reload, a notice) so it does not wait on the list. dialog spreads into ConfirmDialog.
 */
export function useConfirmRemoval<T>(remove: (item: T) => Promise<unknown>, after: (item: T) => unknown) {
  const [item, setItem] = useState<T | null>(null);
  const action = useAction();
  const ask = (t: T) => {
    action.setError(null);
    setItem(t);
  };
  const confirm = () => {
    if (item === null) return;
    action.run(async () => {
      await remove(item);
      setItem(null);
      await after(item);
    });
  };
  const dialog = {
    open: item !== null,
    busy: action.busy,
    error: action.error,
    onConfirm: confirm,
    onCancel: () => setItem(null),
  };
  return { item, ask, busy: action.busy, dialog };
}
