// The pipeline's history: each saved version with who saved it and when, a
// line diff of a version against the current pipeline, and Restore (as a new version).
import { useEffect, useState } from 'preact/hooks';
import { api, canWrite, type Pipeline, type PipelineVersion, type Project } from '../api';
import { ConfirmDialog, ErrorMessage, Loading, When } from '../ui';

interface VersionList {
  versions: PipelineVersion[];
  pipeline_version: number;
  next_before?: number;
  kept: number;
}

/** The pipeline's fields as lines "name: value", one per statement and per line of a value. */
export function pipelineLines(p: Pipeline): string[] {
  const out: string[] = [];
  const add = (name: string, v: unknown) => {
    const text = typeof v === 'string' ? v : JSON.stringify(v);
    text.split('\n').forEach((l, i) => out.push(i === 0 ? `${name}: ${l}` : `${' '.repeat(name.length + 2)}${l}`));
  };
  add('trigger', p.trigger);
  p.transforms.forEach((t, i) => add(`transforms[${i}]`, t));
  if (p.transforms.length === 0) add('transforms', '[]');
  for (const k of ['context_filter', 'group_key', 'dedup_key', 'agent_endpoint_url', 'window_enabled', 'window_duration_seconds',
    'batch_size', 'cooldown_seconds', 'max_calls_per_minute', 'max_calls_per_day', 'window_max_bytes', 'window_max_events'] as const) {
    add(k, p[k] ?? '');
  }
  return out;
}

export type DiffLine = { op: ' ' | '-' | '+'; text: string };

/**
 * A line diff (longest common subsequence). Written here rather than taken from npm: a
 * pipeline is a few dozen lines, and this is all the page needs of a diff library.
 */
export function diffLines(a: string[], b: string[]): DiffLine[] {
  const n = a.length;
  const m = b.length;
  const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      out.push({ op: ' ', text: a[i] });
      i++;
      j++;
    } else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push({ op: '-', text: a[i++] });
    else out.push({ op: '+', text: b[j++] });
  }
  while (i < n) out.push({ op: '-', text: a[i++] });
  while (j < m) out.push({ op: '+', text: b[j++] });
  return out;
}

export function PipelineHistory({ project, current, dirty, onRestored }: {
  project: Project;
  current: Pipeline;
  dirty: boolean;
  onRestored: (p: Pipeline) => void;
}) {
  const base = `/projects/${encodeURIComponent(project.id)}/pipeline/versions`;
  const [list, setList] = useState<VersionList | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [more, setMore] = useState(false);
  const [compared, setCompared] = useState<PipelineVersion | null>(null);
  const [compareError, setCompareError] = useState<unknown>(null);
  const [restoring, setRestoring] = useState<number | null>(null);
  const [busy, setBusy] = useState(false);
  const [restoreError, setRestoreError] = useState<unknown>(null);

  useEffect(() => {
    setError(null);
    api<VersionList>('GET', base).then(setList, setError);
  }, [project.id, current.pipeline_version]);

  const loadMore = async () => {
    if (!list?.next_before) return;
    setMore(true);
    try {
      const next = await api<VersionList>('GET', `${base}?before=${list.next_before}`);
      setList({ ...next, versions: [...list.versions, ...next.versions] });
    } catch (err) {
      setError(err);
    } finally {
      setMore(false);
    }
  };

  const compare = async (n: number) => {
    setCompareError(null);
    try {
      setCompared(await api<PipelineVersion>('GET', `${base}/${n}`));
    } catch (err) {
      setCompareError(err);
    }
  };

  const restore = async () => {
    if (restoring === null) return;
    setBusy(true);
    setRestoreError(null);
    try {
      const p = await api<Pipeline>('POST', `${base}/${restoring}/restore`);
      setRestoring(null);
      setCompared(null);
      onRestored(p);
    } catch (err) {
      setRestoreError(err);
    } finally {
      setBusy(false);
    }
  };

  const who = (v: PipelineVersion) => v.saved_by ?? 'someone no longer known';
  return (
    <section class="panel" aria-labelledby="pl-history">
      <h2 id="pl-history">History</h2>
      <p class="hint">
        Every saved change of the pipeline is a version (destinations and members do not count). The newest{' '}
        {list?.kept ?? 100} are kept.
      </p>
      <ErrorMessage error={error} />
      {!list && !error && <Loading what="the history" />}
      {list && (
        <ul class="history-list" aria-label="Pipeline versions">
          {list.versions.map((v) => (
            <li key={v.version}>
              <span class="grow">
                <strong>Version {v.version}</strong>
                {v.current && <span class="badge badge-quiet"> current</span>}
                {' '}<span class="muted">saved by {who(v)}, <When at={v.saved_at} /></span>
                {v.restored_from ? <span class="muted"> (restored version {v.restored_from})</span> : null}
              </span>
              {!v.current && (
                <button type="button" class="btn btn-small" aria-label={`Compare version ${v.version} with the current pipeline`}
                  onClick={() => compare(v.version)}>
                  Compare with current
                </button>
              )}
              {!v.current && canWrite(project.role) && (
                <button type="button" class="btn btn-small" aria-label={`Restore version ${v.version}`}
                  onClick={() => (setRestoreError(null), setRestoring(v.version))}>
                  Restore
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      {list?.next_before && (
        <button type="button" class="btn btn-small" disabled={more} onClick={loadMore}>
          {more ? 'Loading…' : 'Show older versions'}
        </button>
      )}
      <ErrorMessage error={compareError} />
      {compared?.pipeline && (
        <Diff title={`Version ${compared.version} → current (version ${current.pipeline_version})`}
          lines={diffLines(pipelineLines(compared.pipeline), pipelineLines(current))}
          onClose={() => setCompared(null)} />
      )}
      <ConfirmDialog open={restoring !== null} title={`Restore version ${restoring ?? ''}?`} confirmLabel="Restore version"
        busy={busy} error={restoreError} onConfirm={restore} onCancel={() => setRestoring(null)}>
        <p>
          The pipeline becomes what it was in version {restoring}, saved as a new version
          {current.pipeline_version ? ` ${current.pipeline_version + 1}` : ''}; collectors use it at once.
          {dirty && ' Your unsaved edits are discarded.'}
        </p>
      </ConfirmDialog>
    </section>
  );
}

function Diff({ title, lines, onClose }: { title: string; lines: DiffLine[]; onClose: () => void }) {
  const changed = lines.filter((l) => l.op !== ' ').length;
  return (
    <figure class="diff-figure" aria-label={title}>
      <figcaption>
        <strong>{title}</strong>{' '}
        <span class="muted">{changed === 0 ? 'no difference' : `${changed} line${changed === 1 ? '' : 's'} differ`}</span>{' '}
        <button type="button" class="btn btn-small" onClick={onClose}>Close comparison</button>
      </figcaption>
      <div class="diff" role="table" aria-label="Differences">
        {lines.map((l, i) => (
          <div key={i} role="row" class={l.op === '-' ? 'diff-del' : l.op === '+' ? 'diff-add' : 'diff-same'}>
            <span role="cell">
              <span class="sr-only">{l.op === '-' ? 'removed: ' : l.op === '+' ? 'added: ' : ''}</span>
              <span aria-hidden="true">{l.op} </span>
              {l.text}
            </span>
          </div>
        ))}
      </div>
    </figure>
  );
}
