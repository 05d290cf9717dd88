import type { ComponentChildren } from 'preact';
import type { useConfirmRemoval } from './hooks';
import { ConfirmDialog } from './ui';

/** What a row's button says: its accessible name (naming the item) and its text. */
export type RemoveAction = { label: string; text?: string };

/** What the dialog asks before removing an item. */
export type RemoveConfirm = { title: string; confirmLabel: string; body: ComponentChildren };

/**
 * A table of things that can be revoked or removed: a button at the end of each row asks
 * in a dialog before anything goes, as every such list in the console does (keys, tokens,
 * connected apps, members). The table shows when there are items (the page says what an
 * empty or loading list means). removal is useConfirmRemoval's; action says what a row's
 * button is called, or null for a row without one; withActions false leaves the column
 * out (a role that may not remove anything). busy, when given, holds the dialog's confirm
 * while other work of the page runs.
 */
export function RemovableTable<T>(props: {
  caption: string;
  columns: string[];
  items: T[] | null | undefined;
  id: (item: T) => string;
  cells: (item: T) => ComponentChildren;
  removal: ReturnType<typeof useConfirmRemoval<T>>;
  action: (item: T) => RemoveAction | null;
  confirm: (item: T) => RemoveConfirm;
  withActions?: boolean;
  busy?: boolean;
}) {
  const { removal } = props;
  const withActions = props.withActions ?? true;
  // Closed, the dialog still renders (it closes on success as the item clears).
  const ask = removal.item === null ? { title: '', confirmLabel: '', body: null } : props.confirm(removal.item);
  return (
    <>
      {props.items && props.items.length > 0 && (
        <table>
          <caption class="sr-only">{props.caption}</caption>
          <thead>
            <tr>
              {props.columns.map((c) => (
                <th scope="col" key={c}>
                  {c}
                </th>
              ))}
              {withActions && (
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              )}
            </tr>
          </thead>
          <tbody>
            {props.items.map((item) => {
              const a = withActions ? props.action(item) : null;
              return (
                <tr key={props.id(item)}>
                  {props.cells(item)}
                  {withActions && (
                    <td class="row-actions">
                      {a && (
                        <button type="button" class="btn btn-small btn-danger-quiet" aria-label={a.label}
                          onClick={() => removal.ask(item)}>
                          {a.text ?? 'Revoke'}
                        </button>
                      )}
                    </td>
                  )}
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <ConfirmDialog {...removal.dialog} busy={props.busy ?? removal.dialog.busy} title={ask.title}
        confirmLabel={ask.confirmLabel}>
        <p>{ask.body}</p>
      </ConfirmDialog>
    </>
  );
}
