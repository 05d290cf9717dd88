// Shared pieces. Accessibility is built in here: every field has a <label>, alerts are
// announced (role="alert") and say what they are in words as well as in colour.
import type { ComponentChildren, InputHTMLAttributes } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';
import { Moment } from './time';

type InputProps = InputHTMLAttributes<HTMLInputElement> & { label: string; hint?: ComponentChildren };

export function Field({ label, hint, ...input }: InputProps) {
  const id = useId();
  const hintId = hint ? id + '-hint' : undefined;
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input id={id} {...input} aria-describedby={hintId ?? input['aria-describedby']} />
      {hint && (
        <p id={hintId} class="hint">
          {hint}
        </p>
      )}
    </div>
  );
}

/** An error in words; for a rate limit, the wait too. */
export function ErrorMessage({ error }: { error: unknown }) {
  if (!error) return null;
  let text = error instanceof Error ? error.message : String(error);
  if (error instanceof ApiError && error.code === 'rate_limited' && error.retryAfter > 0) {
    text = `${text.replace(/;? ?try again in \d+ s\.?$/i, '.')} Try again in ${duration(error.retryAfter)}.`;
  }
  return (
    <div class="alert alert-error" role="alert">
      <strong>Error:</strong> {text}
    </div>
  );
}

export function Notice({ children }: { children: ComponentChildren }) {
  return (
    <div class="alert alert-info" role="status">
      {children}
    </div>
  );
}

export function duration(seconds: number): string {
  if (seconds < 60) return `${seconds} second${seconds === 1 ? '' : 's'}`;
  const m = Math.ceil(seconds / 60);
  if (m < 60) return `${m} minute${m === 1 ? '' : 's'}`;
  const h = Math.ceil(m / 60);
  return `${h} hour${h === 1 ? '' : 's'}`;
}

/** A moment to the second with its time zone, how long ago on hover (time.tsx). */
export function When({ at, never = 'never' }: { at: string | null | undefined; never?: string }) {
  return <Moment at={at} never={never} />;
}

export function CopyButton({ text, label }: { text: string; label: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied(true);
      setTimeout(() => setCopied(false), 2000);
    } catch {
      setCopied(false);
    }
  };
  return (
    <button type="button" class="btn btn-small" onClick={copy} aria-label={label}>
      {copied ? 'Copied' : 'Copy'}
    </button>
  );
}

/** A modal confirmation on the native <dialog>, which traps focus and closes on Esc. */
export function ConfirmDialog(props: {
  open: boolean;
  title: string;
  children: ComponentChildren;
  confirmLabel: string;
  busy?: boolean;
  disabled?: boolean;
  error?: unknown;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);
  return (
    <dialog ref={ref} aria-labelledby={titleId} onCancel={(e) => (e.preventDefault(), props.onCancel())}>
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          props.onConfirm();
        }}
      >
        <h2 id={titleId}>{props.title}</h2>
        {props.children}
        <ErrorMessage error={props.error} />
        <div class="actions">
          <button type="button" class="btn" onClick={props.onCancel}>
            Cancel
          </button>
          <button type="submit" class="btn btn-danger" disabled={props.busy || props.disabled}>
            {props.confirmLabel}
          </button>
        </div>
      </form>
    </dialog>
  );
}

/** The page's heading; within a project, the project's name above it. */
export function PageHeader({ title, project, children }: { title: string; project?: string; children?: ComponentChildren }) {
  useEffect(() => {
    document.title = [title, project, 'otelcol-svc'].filter(Boolean).join(' · ');
  }, [title, project]);
  return (
    <header class="page-header">
      <div>
        {project && <p class="crumb">{project}</p>}
        <h1>{title}</h1>
      </div>
      {children}
    </header>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" role="status">
      Loading {what}…
    </p>
  );
}

/** A useLoad's state before its data: the error, or while it is on its way, saying so. */
export function LoadStatus({ load, what }: { load: { data: unknown; error: unknown }; what: string }) {
  return (
    <>
      <ErrorMessage error={load.error} />
      {!load.data && !load.error && <Loading what={what} />}
    </>
  );
}
