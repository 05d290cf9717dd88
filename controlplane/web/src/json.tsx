// A JSON value shown pretty-printed in monospace, with a copy button.
import { CopyButton } from './ui';

export function JsonBlock({ value, label, maxHeight }: { value: unknown; label: string; maxHeight?: number }) {
  const text = typeof value === 'string' ? value : JSON.stringify(value, null, 2);
  return (
    <figure class="json-block">
      <figcaption>
        <span>{label}</span>
        <CopyButton text={text} label={`Copy ${label.toLowerCase()}`} />
      </figcaption>
      <pre class="code json" tabIndex={0} aria-label={label} style={maxHeight ? { maxHeight: `${maxHeight}px` } : undefined}>
        {text}
      </pre>
    </figure>
  );
}
