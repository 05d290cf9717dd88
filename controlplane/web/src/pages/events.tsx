// Recent events: the project's newest records, read live from the receiver's console API
// (GET .../events). New records come in at the top without a reload; the list is
// virtualised (fixed row height, only the rows in view are in the DOM), so thousands of
// rows scroll as smoothly as ten.
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, ApiError, type Project, type Source } from '../api';
import { consoleApi, type ConsoleEvent } from '../console';
import { FilterSelect } from '../filters';
import { JsonBlock } from '../json';
import { formatMoment, Moment } from '../time';
import { ErrorMessage, PageHeader } from '../ui';

/** How many records the view keeps; older ones fall off the bottom. */
export const MAX_ROWS = 5000;
const ROW_HEIGHT = 34;
const VIEWPORT_ROWS = 16;
const OVERSCAN = 8;
// Under a second, so that a record shows within a second of being stored.
const POLL_MS = 700;
// A poll asks for the few records that usually arrived since the last one; when all of
// them are new, more may have come, and the next poll asks for the most the API gives.
const POLL_LIMIT = 100;
const CATCH_UP_LIMIT = 500;

const signals = ['log', 'span', 'metric', 'event', 'source'];

export function eventType(r: unknown): string {
  if (r && typeof r === 'object') {
    const o = r as Record<string, unknown>;
    if (typeof o._event_type === 'string') return o._event_type;
    if (typeof o.severityText === 'string' && o.severityText) return o.severityText;
    if (typeof o.name === 'string') return o.name;
  }
  return '';
}

function summary(r: unknown): string {
  if (r && typeof r === 'object') {
    const o = r as Record<string, unknown>;
    for (const k of ['body', 'text', 'message']) {
      if (typeof o[k] === 'string' && o[k]) return o[k] as string;
    }
    // A push source's envelope: what the source sent says more than the envelope.
    if (o.payload !== undefined) r = o.payload;
  }
  const s = JSON.stringify(r);
  return s.length > 300 ? s.slice(0, 300) + '…' : s;
}

export function EventsPage({ project }: { project: Project }) {
  const [events, setEvents] = useState<ConsoleEvent[]>([]);
  const [loaded, setLoaded] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [paused, setPaused] = useState(false);
  const [sourceId, setSourceId] = useState('');
  const [signal, setSignal] = useState('');
  const [type, setType] = useState('');
  const [sources, setSources] = useState<Source[]>([]);
  const [selected, setSelected] = useState<number | null>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const listRef = useRef<HTMLDivElement>(null);
  // Rows added above the ones in view since the last render, to keep the view still.
  const pushedDown = useRef(0);
  const filterRef = useRef({ signal, type });
  filterRef.current = { signal, type };
  const pausedRef = useRef(paused);
  pausedRef.current = paused;

  useEffect(() => {
    api<{ sources: Source[] }>('GET', `/projects/${encodeURIComponent(project.id)}/sources`).then((r) => setSources(r.sources), () => {});
  }, [project.id]);

  // The poll: newest first; only records newer than the newest held are added.
  useEffect(() => {
    setEvents([]);
    setLoaded(false);
    setSelected(null);
    let stop = false;
    let timer = 0;
    let limit = CATCH_UP_LIMIT;
    let newest = 0;
    const q = (n: number) => `/events?limit=${n}` + (sourceId ? `&source_id=${encodeURIComponent(sourceId)}` : '');
    const poll = async () => {
      // Polls start a second apart, however long the last one took.
      const began = performance.now();
      let wait = POLL_MS;
      if (!pausedRef.current && !document.hidden) {
        try {
          const r = await consoleApi<{ events: ConsoleEvent[] }>(project.id, 'GET', q(limit));
          if (stop) return;
          const fresh = r.events.filter((e) => e.seq > newest);
          if (newest > 0 && limit < CATCH_UP_LIMIT && r.events.length >= limit && fresh.length === r.events.length) {
            // Every record is new, so there may be more between: ask again, at once, for
            // the most the API gives, rather than leave a gap in the list.
            limit = CATCH_UP_LIMIT;
            if (!stop) timer = window.setTimeout(poll, 0);
            return;
          }
          limit = POLL_LIMIT;
          if (fresh.length > 0) {
            newest = fresh[0].seq;
            const { signal: sg, type: ty } = filterRef.current;
            pushedDown.current += fresh.filter((e) => (!sg || e.signal === sg) && (!ty || eventType(e.record) === ty)).length;
            setEvents((old) => (old.length === 0 ? fresh : [...fresh, ...old]).slice(0, MAX_ROWS));
          }
          setLoaded(true);
          setError(null);
        } catch (err) {
          if (stop) return;
          setError(err);
          if (err instanceof ApiError && (err.status === 403 || err.status === 404)) return; // not this user's project
          wait = Math.max(POLL_MS, (err instanceof ApiError ? err.retryAfter : 0) * 1000, 3000);
        }
      }
      if (!stop) timer = window.setTimeout(poll, Math.max(0, wait - (performance.now() - began)));
    };
    poll();
    return () => {
      stop = true;
      clearTimeout(timer);
    };
  }, [project.id, sourceId]);

  const shown = useMemo(
    () => events.filter((e) => (!signal || e.signal === signal) && (!type || eventType(e.record) === type)),
    [events, signal, type],
  );
  const types = useMemo(() => {
    const s = new Set<string>();
    for (const e of events) {
      const t = eventType(e.record);
      if (t) s.add(t);
      if (s.size >= 200) break;
    }
    return [...s].sort();
  }, [events]);

  // Rows that came in above keep the rows being read where they are, unless the reader
  // is at the top, where new rows are what they are watching for.
  useLayoutEffect(() => {
    const el = listRef.current;
    const n = pushedDown.current;
    pushedDown.current = 0;
    if (el && n > 0 && el.scrollTop > 0) {
      el.scrollTop += n * ROW_HEIGHT;
      setScrollTop(el.scrollTop);
    }
  }, [shown]);

  // Up and down arrows move between rows, scrolling the list: the rows out of view are
  // not in the DOM for Tab to reach.
  const onKeyDown = (e: KeyboardEvent) => {
    const el = listRef.current;
    const row = (e.target as HTMLElement).closest('[aria-posinset]');
    if (!el || !row || !['ArrowDown', 'ArrowUp', 'Home', 'End'].includes(e.key)) return;
    e.preventDefault();
    const at = Number(row.getAttribute('aria-posinset')) - 1;
    const to = e.key === 'Home' ? 0 : e.key === 'End' ? shown.length - 1 : Math.min(shown.length - 1, Math.max(0, at + (e.key === 'ArrowDown' ? 1 : -1)));
    const top = to * ROW_HEIGHT;
    if (top < el.scrollTop) el.scrollTop = top;
    else if (top + ROW_HEIGHT > el.scrollTop + el.clientHeight) el.scrollTop = top + ROW_HEIGHT - el.clientHeight;
    setScrollTop(el.scrollTop);
    requestAnimationFrame(() => el.querySelector<HTMLButtonElement>(`[aria-posinset="${to + 1}"] button`)?.focus());
  };

  const first = Math.max(0, Math.floor(scrollTop / ROW_HEIGHT) - OVERSCAN);
  const last = Math.min(shown.length, Math.ceil((scrollTop + VIEWPORT_ROWS * ROW_HEIGHT) / ROW_HEIGHT) + OVERSCAN);
  const rows = shown.slice(first, last);
  // A row from before today shows its date: the time column widens for the rows in view.
  const today = new Date().toDateString();
  const dated = rows.some((e) => new Date(e.time).toDateString() !== today);
  const current = selected === null ? null : events.find((e) => e.seq === selected) ?? null;
  const sourceName = (id?: string) => (id ? sources.find((s) => s.id === id)?.name ?? id : '');
  // Live only while reads succeed: during an error (the receiver down, or this page's
  // origin not allowed) the list is not being kept up to date, and the dot says so.
  const liveness = paused ? 'Paused' : error ? 'Not live' : !loaded ? 'Connecting' : 'Live';

  return (
    <>
      <PageHeader title="Recent events" project={project.name}>
        <div class="live">
          <span class={'live-dot' + (liveness === 'Live' ? '' : liveness === 'Not live' ? ' live-off' : ' live-paused')} aria-hidden="true" />
          <span role="status" aria-label={liveness}>{liveness}</span>
          <button type="button" class="btn btn-small" aria-pressed={paused} onClick={() => setPaused(!paused)}>
            {paused ? 'Resume' : 'Pause'}
          </button>
        </div>
      </PageHeader>
      <p class="lede">The project's newest records as stored, newest first, read from the receiver as they arrive. Up and down arrows move between rows.</p>
      <div class="filters" role="group" aria-label="Filters">
        <FilterSelect label="Source" value={sourceId} onChange={setSourceId}>
          <option value="">All sources</option>
          {sources.map((s) => (
            <option key={s.id} value={s.id}>{s.name}</option>
          ))}
        </FilterSelect>
        <FilterSelect label="Signal" value={signal} onChange={setSignal}>
          <option value="">All signals</option>
          {signals.map((s) => (
            <option key={s} value={s}>{s}</option>
          ))}
        </FilterSelect>
        <FilterSelect label="Event type" value={type} onChange={setType}>
          <option value="">All types</option>
          {types.map((t) => (
            <option key={t} value={t}>{t}</option>
          ))}
        </FilterSelect>
        <span class="muted small" role="status" aria-live="polite">
          {shown.length === events.length ? '' : `${shown.length.toLocaleString()} of `}
          {events.length.toLocaleString()} event{events.length === 1 ? '' : 's'}
        </span>
      </div>
      <ErrorMessage error={error} />
      <div class={'events-layout' + (current ? ' with-detail' : '')}>
        <div class={'events-table' + (dated ? ' events-dated' : '')}>
          <div class="events-head" aria-hidden="true">
            <span>Time</span><span>Signal</span><span>Type</span><span>Record</span>
          </div>
          <div ref={listRef} class="events-scroll" style={{ height: `${VIEWPORT_ROWS * ROW_HEIGHT}px` }} tabIndex={-1}
            onScroll={(e) => setScrollTop(e.currentTarget.scrollTop)} onKeyDown={onKeyDown}>
            {loaded && shown.length === 0 && (
              <p class="empty events-empty">
                {events.length === 0 ? 'No events yet. Send one with a key from API keys; it shows here within a second.' : 'No event matches these filters.'}
              </p>
            )}
            {!loaded && !error && <p class="muted events-empty" role="status">Loading the newest events…</p>}
            <div role="list" aria-label="Events" class="events-rows" style={{ height: `${shown.length * ROW_HEIGHT}px` }}>
              {rows.map((e, i) => {
                const at = new Date(e.time);
                const ty = eventType(e.record);
                return (
                  <div role="listitem" key={e.seq} class="events-row" aria-setsize={shown.length} aria-posinset={first + i + 1}
                    style={{ top: `${(first + i) * ROW_HEIGHT}px`, height: `${ROW_HEIGHT}px` }}>
                    <button type="button" class={'events-btn' + (selected === e.seq ? ' is-selected' : '')}
                      aria-expanded={selected === e.seq} aria-controls="event-detail"
                      onClick={() => setSelected(selected === e.seq ? null : e.seq)}>
                      <time dateTime={e.time} class="mono" title={isNaN(at.getTime()) ? undefined : formatMoment(at, { ms: true, date: true })}>
                        {isNaN(at.getTime()) ? e.time : formatMoment(at, { ms: true })}
                      </time>
                      <span class={`sig sig-${e.signal}`}>{e.signal}</span>
                      <span class="ev-type" title={ty}>{ty || <span class="muted">—</span>}</span>
                      <span class="ev-summary mono">{summary(e.record)}</span>
                    </button>
                  </div>
                );
              })}
            </div>
          </div>
        </div>
        {current && (
          <section id="event-detail" class="panel event-detail" aria-label={`Event ${current.seq}`}>
            <div class="detail-head">
              <h2>Event #{current.seq}</h2>
              <button type="button" class="btn btn-small" onClick={() => setSelected(null)}>Close</button>
            </div>
            <dl class="meta">
              <dt>Stored</dt><dd><Moment at={current.time} ms relative /></dd>
              <dt>Signal</dt><dd>{current.signal}</dd>
              {current.source_id && (<><dt>Source</dt><dd>{sourceName(current.source_id)}</dd></>)}
            </dl>
            <JsonBlock value={current.record} label="Record JSON" maxHeight={420} />
          </section>
        )}
      </div>
    </>
  );
}
