// A filter's select with its label beside it (for=id, not wrapped, so the label alone is
// its name, not the label plus every option's text).
import type { ComponentChildren } from 'preact';
import { useId } from 'preact/hooks';

export function FilterSelect(props: { label: string; value: string; onChange: (v: string) => void; children: ComponentChildren }) {
  const id = useId();
  return (
    <div class="filter">
      <label for={id}>{props.label}</label>
      <select id={id} value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)}>
        {props.children}
      </select>
    </div>
  );
}
