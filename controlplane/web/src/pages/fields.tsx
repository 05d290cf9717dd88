// Fields: the field paths of the project's recent records (GET .../fields), how many of
// the sampled records have each and the JSON types seen. Choosing one puts a condition on
// it into the pipeline's trigger as OTTL, on the Pipeline page, unsaved.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { canWrite, type Project } from '../api';
import { consoleApi, type ConsoleEvent, type FieldStat } from '../console';
import { offerToTrigger, ottlPath, pathKeys, splitPath } from '../ottlpath';
import { navigate } from '../router';
import { CopyButton, ErrorMessage, Loading, PageHeader } from '../ui';

const SAMPLE = 100;

export function FieldsPage({ project }: { project: Project }) {
  const [fields, setFields] = useState<FieldStat[] | null>(null);
  const [sampled, setSampled] = useState(0);
  const [truncated, setTruncated] = useState(false);
  const [records, setRecords] = useState<unknown[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [filter, setFilter] = useState('');
  const [busy, setBusy] = useState(false);
  const writable = canWrite(project.role);

  const load = async () => {
    setBusy(true);
    try {
      const f = await consoleApi<{ sampled: number; fields: FieldStat[]; truncated?: boolean }>(project.id, 'GET', `/fields?limit=${SAMPLE}`);
      // The receiver names each field in OTTL; one that does not (older) leaves it to the
      // records, which resolve the listed paths to keys (a key with dots in it).
      let recs: unknown[] = [];
      if (f.fields.some((x) => !x.ottl)) {
        const ev = await consoleApi<{ events: ConsoleEvent[] }>(project.id, 'GET', `/events?limit=${SAMPLE}`);
        recs = ev.events.map((e) => e.record);
      }
      setFields(f.fields);
      setSampled(f.sampled);
      setTruncated(!!f.truncated);
      setRecords(recs);
      setError(null);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  useEffect(() => {
    load();
  }, [project.id]);

  const keys = useMemo(() => pathKeys(records), [records]);
  const ottl = (f: FieldStat) => f.ottl || ottlPath(keys.get(f.path) ?? splitPath(f.path));
  const shown = useMemo(() => {
    const f = filter.trim().toLowerCase();
    return (fields ?? []).filter((x) => !f || x.path.toLowerCase().includes(f));
  }, [fields, filter]);

  const use = (f: FieldStat) => {
    offerToTrigger(project.id, ottl(f));
    navigate(`/projects/${encodeURIComponent(project.id)}/pipeline`);
  };

  return (
    <>
      <PageHeader title="Fields" project={project.name}>
        <button type="button" class="btn" onClick={load} disabled={busy}>{busy ? 'Refreshing…' : 'Refresh'}</button>
      </PageHeader>
      <p class="lede">
        The fields of the newest {SAMPLE} records and the OTTL that reads each one.{' '}
        {writable ? 'Choose a field to add a condition on it to the pipeline\u2019s trigger.' : 'Copy a field\u2019s OTTL to use it in a trigger.'}
      </p>
      <ErrorMessage error={error} />
      {!fields && !error && <Loading what="the fields" />}
      {fields && (
        <>
          <div class="filters">
            <label>
              Find a field
              <input type="search" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} placeholder="http.method" />
            </label>
            <span class="muted small" role="status">
              {fields.length} field{fields.length === 1 ? '' : 's'} in {sampled} record{sampled === 1 ? '' : 's'}
              {truncated ? ' (sample cut short: records are large or varied)' : ''}
            </span>
          </div>
          {fields.length === 0 ? (
            <p class="empty">No records yet: send events with a key from API keys, then refresh.</p>
          ) : (
            <table class="fields-table">
              <caption class="sr-only">Fields of the sampled records</caption>
              <thead>
                <tr>
                  <th scope="col">Field</th>
                  <th scope="col">OTTL</th>
                  <th scope="col" class="num">In records</th>
                  <th scope="col">Types</th>
                  <th scope="col"><span class="sr-only">Actions</span></th>
                </tr>
              </thead>
              <tbody>
                {shown.map((f) => {
                  const share = sampled ? f.count / sampled : 0;
                  const expr = ottl(f);
                  return (
                    <tr key={f.path}>
                      <td class="mono field-path">{f.path}</td>
                      <td><code>{expr}</code></td>
                      <td class="num share">
                        <span class="share-bar" aria-hidden="true"><span style={{ width: `${Math.round(share * 100)}%` }} /></span>
                        {Math.round(share * 100)}% <span class="muted small">({f.count})</span>
                      </td>
                      <td>{f.types.map((t) => <span key={t} class="badge type-badge">{t}</span>)}</td>
                      <td class="row-actions">
                        {writable ? (
                          <button type="button" class="btn btn-small" aria-label={`Add ${f.path} to the trigger`} onClick={() => use(f)}>
                            Add to trigger
                          </button>
                        ) : (
                          <CopyButton text={expr} label={`Copy the OTTL of ${f.path}`} />
                        )}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          )}
        </>
      )}
    </>
  );
}
