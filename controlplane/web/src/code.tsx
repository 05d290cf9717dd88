// An OTTL expression field: a monospace textarea whose problem, reported by the data
// plane's compiler, is shown under it at its line and column (a caret under the spot, and
// a button that puts the cursor there), in words as well as in colour.
import type { ComponentChildren } from 'preact';
import { useId, useRef } from 'preact/hooks';
import type { PipelineProblem } from './api';
import { sentence } from './api';

/** The offset in text of a 1-based line and column, clamped to the text. */
export function offsetAt(text: string, line: number, column: number): number {
  const lines = text.split('\n');
  let off = 0;
  for (let i = 0; i < Math.min(line - 1, lines.length - 1); i++) off += lines[i].length + 1;
  const l = lines[Math.min(line - 1, lines.length - 1)] ?? '';
  return off + Math.max(0, Math.min(column - 1, l.length));
}

export function CodeField(props: {
  label: string;
  value: string;
  onInput: (v: string) => void;
  problem?: PipelineProblem;
  hint?: ComponentChildren;
  placeholder?: string;
  readOnly?: boolean;
  rows?: number;
  actions?: ComponentChildren;
  /** Warnings about a valid expression: shown in amber, they do not block saving. */
  warnings?: PipelineProblem[];
}) {
  const id = useId();
  const ref = useRef<HTMLTextAreaElement>(null);
  const hintId = props.hint ? id + '-hint' : '';
  const problemId = props.problem ? id + '-problem' : '';
  const warnings = props.problem ? [] : (props.warnings ?? []);
  const warningIds = warnings.map((_, i) => `${id}-warning-${i}`);
  const described = [hintId, problemId, ...warningIds].filter(Boolean).join(' ') || undefined;
  return (
    <div class={'field code-field' + (props.problem ? ' has-problem' : '')}>
      <div class="code-field-head">
        <label for={id}>{props.label}</label>
        {props.actions}
      </div>
      <textarea id={id} ref={ref} class="mono" rows={props.rows ?? 2} spellcheck={false} autocomplete="off"
        autocapitalize="off" value={props.value} placeholder={props.readOnly ? undefined : props.placeholder} readOnly={props.readOnly}
        aria-invalid={props.problem ? 'true' : undefined} aria-describedby={described}
        onInput={(e) => props.onInput(e.currentTarget.value)} />
      {props.hint && (
        <p id={hintId} class="hint">
          {props.hint}
        </p>
      )}
      {props.problem && <Problem id={problemId} text={props.value} problem={props.problem} input={ref} />}
      {warnings.map((w, i) => <Problem key={i} id={warningIds[i]} text={props.value} problem={w} input={ref} warning />)}
    </div>
  );
}

/** A field's problem; for an expression with a position, the line with a caret under it. */
export function Problem({ id, text, problem, input, warning }: {
  id: string;
  text?: string;
  problem: PipelineProblem;
  input?: { current: HTMLTextAreaElement | HTMLInputElement | null };
  warning?: boolean;
}) {
  const pos = problem.position;
  const line = pos && text !== undefined ? (text.split('\n')[pos.line - 1] ?? '') : '';
  // The heading says where; the parser's own "at 1:20" would say it twice.
  const message = pos ? problem.message.replace(` at ${pos.line}:${pos.column}`, '') : problem.message;
  const goTo = () => {
    const el = input?.current;
    if (!el || !pos || text === undefined) return;
    const at = offsetAt(text, pos.line, pos.column);
    el.focus();
    el.setSelectionRange(at, Math.min(at + 1, text.length));
  };
  return (
    <div id={id} class={warning ? 'problem problem-warning' : 'problem'}>
      <p class="problem-text">
        <strong>{warning ? 'Warning' : 'Error'}{pos ? ` at line ${pos.line}, column ${pos.column}` : ''}:</strong> {sentence(message)}
      </p>
      {pos && text !== undefined && (
        <div class="problem-where">
          <pre class="problem-snippet" aria-hidden="true">
            {line}
            {'\n'}
            {' '.repeat(Math.max(0, pos.column - 1))}
            <span class="caret">^</span>
          </pre>
          {input && (
            <button type="button" class="btn btn-small" onClick={goTo}>
              Go to line {pos.line}, column {pos.column}
            </button>
          )}
        </div>
      )}
    </div>
  );
}
