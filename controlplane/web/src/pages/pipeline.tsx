import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { api, ApiError, canWrite, type Pipeline, type PipelineCheck, type PipelineMode, type PipelineProblem, type Project } from '../api';
import { CodeField, Problem } from '../code';
import { takeOffered, withCondition } from '../ottlpath';
import { useLeaveGuard } from '../router';
import { ConfirmDialog, CopyButton, ErrorMessage, Loading, Notice, PageHeader, When } from '../ui';
import { PipelineHistory } from './pipeline-history';
import { TryIt } from './tryit';

// The form keeps numbers as typed (an empty box is "the default"), and sends numbers.
type NumberKey =
  | 'window_duration_seconds'
  | 'batch_size'
  | 'cooldown_seconds'
  | 'max_calls_per_minute'
  | 'max_calls_per_day'
  | 'window_max_bytes'
  | 'window_max_events';
const numberKeys: NumberKey[] = ['window_duration_seconds', 'batch_size', 'cooldown_seconds', 'max_calls_per_minute',
  'max_calls_per_day', 'window_max_bytes', 'window_max_events'];

// Incident mode's fields: OTTL expressions and Go duration strings ("30s", "5m"), "" the default.
type IncidentKey = 'fingerprint' | 'resolve_when' | 'group_wait' | 'group_interval' | 'resolve_after' | 'reopen_within';
const incidentKeys: IncidentKey[] = ['fingerprint', 'resolve_when', 'group_wait', 'group_interval', 'resolve_after', 'reopen_within'];

interface Draft {
  trigger: string;
  transforms: string[];
  context_filter: string;
  group_key: string;
  dedup_key: string;
  agent_endpoint_url: string;
  mode: PipelineMode;
  incident: Record<IncidentKey, string>;
  numbers: Record<NumberKey, string>;
  /** The control plane answers with a mode: it takes one (older ones refuse the field). */
  knowsMode: boolean;
}

function toDraft(p: Pipeline): Draft {
  const numbers = {} as Record<NumberKey, string>;
  for (const k of numberKeys) numbers[k] = p[k] ? String(p[k]) : '';
  const incident = {} as Record<IncidentKey, string>;
  for (const k of incidentKeys) incident[k] = p[k] ?? '';
  return {
    trigger: p.trigger, transforms: [...p.transforms], context_filter: p.context_filter, group_key: p.group_key,
    dedup_key: p.dedup_key ?? '', agent_endpoint_url: p.agent_endpoint_url,
    mode: p.mode || (p.window_enabled ? 'window' : 'legacy'), incident, numbers, knowsMode: p.mode !== undefined,
  };
}

function toBody(d: Draft) {
  const body: Record<string, unknown> = {
    trigger: d.trigger, transforms: d.transforms.filter((t) => t.trim() !== ''), context_filter: d.context_filter,
    group_key: d.group_key, dedup_key: d.dedup_key, agent_endpoint_url: d.agent_endpoint_url.trim(),
    window_enabled: d.mode === 'window',
  };
  if (d.knowsMode || d.mode === 'incident') {
    body.mode = d.mode;
    for (const k of incidentKeys) body[k] = d.incident[k].trim();
  }
  for (const k of numberKeys) body[k] = d.numbers[k].trim() === '' ? 0 : Number(d.numbers[k]);
  return body;
}

/** How long typing pauses before the draft is checked. */
const CHECK_DELAY_MS = 350;

export function PipelinePage({ project }: { project: Project }) {
  const base = `/projects/${encodeURIComponent(project.id)}/pipeline`;
  const writable = canWrite(project.role);
  const [saved, setSaved] = useState<Pipeline | null>(null);
  const [draft, setDraft] = useState<Draft | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [problems, setProblems] = useState<PipelineProblem[]>([]);
  const [checking, setChecking] = useState(false);
  const [checkError, setCheckError] = useState<unknown>(null);
  const [saving, setSaving] = useState(false);
  const [saveError, setSaveError] = useState<unknown>(null);
  const [savedNote, setSavedNote] = useState(false);
  const [dirty, setDirty] = useState(false);
  const [offered, setOffered] = useState('');
  // Warnings about a valid draft (a field the project's records never had): amber, they
  // never block saving.
  const [warnings, setWarnings] = useState<PipelineProblem[]>([]);
  const [showHistory, setShowHistory] = useState(false);
  // Leaving with unsaved edits asks first: the navigation waits here.
  const [leaving, setLeaving] = useState<(() => void) | null>(null);
  useLeaveGuard(writable && dirty, (proceed) => setLeaving(() => proceed));
  const seq = useRef(0);

  useEffect(() => {
    api<Pipeline>('GET', base).then((p) => {
      setSaved(p);
      const d = toDraft(p);
      // A field chosen on the Fields page joins the trigger, for the user to review and save.
      const field = takeOffered(project.id);
      if (field && writable) {
        d.trigger = withCondition(d.trigger, field);
        setOffered(field);
        setDirty(true);
      } else {
        // The saved pipeline's warnings (a field the records never had) show on arrival
        // too, not only while editing; a check that fails here is the typing check's to tell.
        const n = seq.current;
        api<PipelineCheck>('POST', base + '/validate', toBody(d)).then(
          (res) => n === seq.current && setWarnings(res.warnings ?? []),
          () => {},
        );
      }
      setDraft(d);
    }, setLoadError);
  }, [project.id]);

  // Check the draft a moment after typing stops; an answer to an older draft is dropped.
  useEffect(() => {
    if (!draft || !dirty || !writable) return;
    const n = ++seq.current;
    setChecking(true);
    const t = setTimeout(async () => {
      try {
        const res = await api<PipelineCheck>('POST', base + '/validate', toBody(draft));
        if (n !== seq.current) return;
        setProblems(res.errors);
        setWarnings(res.warnings ?? []);
        setCheckError(null);
      } catch (err) {
        if (n !== seq.current) return;
        setCheckError(err);
      } finally {
        if (n === seq.current) setChecking(false);
      }
    }, CHECK_DELAY_MS);
    return () => clearTimeout(t);
  }, [draft, dirty]);

  if (loadError) return <><PageHeader title="Pipeline" project={project.name} /><ErrorMessage error={loadError} /></>;
  if (!draft || !saved) return <><PageHeader title="Pipeline" project={project.name} /><Loading what="the pipeline" /></>;

  const change = (f: (d: Draft) => Draft) => {
    setDraft(f(draft));
    setDirty(true);
    setSavedNote(false);
  };
  const set = <K extends keyof Draft>(k: K) => (v: Draft[K]) => change((d) => ({ ...d, [k]: v }));
  const setNum = (k: NumberKey) => (v: string) => change((d) => ({ ...d, numbers: { ...d.numbers, [k]: v } }));
  const setInc = (k: IncidentKey) => (v: string) => change((d) => ({ ...d, incident: { ...d.incident, [k]: v } }));
  const incidentMode = draft.mode === 'incident';
  // A transforms problem names its statement; one that names none belongs to the list.
  const problem = (field: string, index?: number) => problems.find((p) => p.field === field && p.index === index);
  const warned = (field: string, index?: number) => warnings.filter((w) => w.field === field && w.index === index);
  const placed = new Set(['trigger', 'transforms', 'context_filter', 'agent_endpoint_url', 'window_max_bytes', 'window_max_events',
    'window_duration_seconds', 'max_calls_per_minute', 'max_calls_per_day',
    ...(incidentMode ? incidentKeys : ['group_key', 'dedup_key', 'cooldown_seconds', 'batch_size'])]);
  const unplaced = problems.filter((p) => !placed.has(p.field));

  const save = async (e: Event) => {
    e.preventDefault();
    setSaving(true);
    setSaveError(null);
    try {
      const p = await api<Pipeline>('PUT', base, toBody(draft));
      setSaved(p);
      setDraft(toDraft(p));
      setDirty(false);
      setProblems([]);
      setWarnings(p.warnings ?? []);
      setSavedNote(true);
    } catch (err) {
      setSaveError(err);
      if (err instanceof ApiError && err.code === 'invalid_pipeline') setDirty(true); // re-check to place it
    } finally {
      setSaving(false);
    }
  };

  const ro = !writable;
  const status = !writable ? null : checking ? (
    <span class="check-status" role="status">Checking…</span>
  ) : checkError ? null : problems.length > 0 ? (
    <span class="check-status check-bad" role="status">
      ✗ {problems.length === 1 ? '1 problem' : `${problems.length} problems`} to fix before saving
    </span>
  ) : dirty && warnings.length > 0 ? (
    <span class="check-status check-warn" role="status">
      ✓ Valid, not saved yet; {warnings.length === 1 ? '1 warning' : `${warnings.length} warnings`} to look at
    </span>
  ) : dirty ? (
    <span class="check-status check-ok" role="status">✓ Valid, not saved yet</span>
  ) : null;
  const restored = (p: Pipeline) => {
    setSaved(p);
    setDraft(toDraft(p));
    setDirty(false);
    setProblems([]);
    setWarnings(p.warnings ?? []);
    setSavedNote(true);
  };

  return (
    <>
      <PageHeader title="Pipeline" project={project.name}>
        <p class="muted small">
          Version {saved.pipeline_version ?? saved.version ?? 0}, saved <When at={saved.saved_at ?? saved.updated_at ?? null} />
          {saved.saved_by ? ` by ${saved.saved_by}` : ''}{' '}
          <button type="button" class="btn btn-small" aria-expanded={showHistory} aria-controls="pl-history-panel"
            onClick={() => setShowHistory(!showHistory)}>
            {showHistory ? 'Hide history' : 'History'}
          </button>
        </p>
      </PageHeader>
      <p class="lede">
        Which events call your agent, how they are grouped, and where the call goes. Expressions are OTTL over each
        event: <code>body</code>, <code>attributes["http.method"]</code>, <code>severity_number</code>,{' '}
        <code>event["field"]</code>.
      </p>
      {showHistory && (
        <div id="pl-history-panel">
          <PipelineHistory project={project} current={saved} dirty={dirty} onRestored={restored} />
        </div>
      )}
      {ro && (
        <Notice>
          You can see this pipeline; only the project's owner and admins change it.
        </Notice>
      )}
      {offered && dirty && (
        <Notice>
          Added <code>{offered} != nil</code> to the trigger from Fields. Adjust the condition, try it below, then save.
        </Notice>
      )}
      <form onSubmit={save} aria-label="Pipeline settings">
        <section class="panel" aria-labelledby="pl-when">
          <h2 id="pl-when">Which events</h2>
          <CodeField label="Trigger" value={draft.trigger} onInput={set('trigger')} problem={problem('trigger')} readOnly={ro}
            warnings={warned('trigger')}
            placeholder={'severity_number >= 17 and resource_attributes["service.name"] == "checkout"'}
            hint={incidentMode
              ? 'An OTTL condition. Events that match open their fingerprint’s incident, or join it when one is open; empty matches every event.'
              : 'An OTTL condition. Events that match call the agent; empty matches every event.'} />
          <CodeField label="Context filter" value={draft.context_filter} onInput={set('context_filter')} readOnly={ro}
            problem={problem('context_filter')} warnings={warned('context_filter')} placeholder={'resource_attributes["service.name"] == "checkout"'}
            hint={incidentMode
              ? 'Which earlier events of the fingerprint go into each call’s window (OTTL condition; empty: all).'
              : 'In window mode, which earlier events of the group go into the window (OTTL condition; empty: all).'} />
          <fieldset class="transforms">
            <legend>Transforms</legend>
            <p class="hint">OTTL statements run in order on each matching event before it is sent, e.g.{' '}
              <code>delete_key(event, "traceId")</code>.</p>
            {draft.transforms.length === 0 && <p class="muted">No transforms: events reach the agent as stored.</p>}
            {draft.transforms.map((t, i) => (
              <CodeField key={i} label={`Statement ${i + 1}`} value={t} readOnly={ro} rows={1}
                onInput={(v) => set('transforms')(draft.transforms.map((x, j) => (j === i ? v : x)))}
                problem={problem('transforms', i)} warnings={warned('transforms', i)}
                actions={!ro && (
                  <button type="button" class="btn btn-small btn-danger-quiet" aria-label={`Remove statement ${i + 1}`}
                    onClick={() => set('transforms')(draft.transforms.filter((_, j) => j !== i))}>
                    Remove
                  </button>
                )} />
            ))}
            {problem('transforms') && <Problem id="problem-transforms" problem={problem('transforms')!} />}
            {!ro && (
              <button type="button" class="btn btn-small" onClick={() => set('transforms')([...draft.transforms, ''])}>
                Add statement
              </button>
            )}
          </fieldset>
        </section>

        <section class="panel" aria-labelledby="pl-how">
          <h2 id="pl-how">How they are grouped</h2>
          <fieldset class="radio-row">
            <legend>Mode</legend>
            <label class="radio">
              <input type="radio" name="mode" checked={draft.mode === 'legacy'} disabled={ro}
                onChange={() => set('mode')('legacy')} />
              <span><strong>Legacy</strong> <span class="muted">batches of matching events as they arrive, several per call</span></span>
            </label>
            <label class="radio">
              <input type="radio" name="mode" checked={draft.mode === 'window'} disabled={ro}
                onChange={() => set('mode')('window')} />
              <span><strong>Window</strong> <span class="muted">each matching event is sent with the earlier events of its group</span></span>
            </label>
            <label class="radio">
              <input type="radio" name="mode" checked={draft.mode === 'incident'} disabled={ro}
                onChange={() => set('mode')('incident')} />
              <span><strong>Incident</strong> <span class="muted">events grouped into incidents by fingerprint; the agent hears when one
                opens and as it changes</span></span>
            </label>
          </fieldset>
          {incidentMode && (
            <div class="incident-fields">
              <CodeField label="Fingerprint" value={draft.incident.fingerprint} onInput={setInc('fingerprint')} rows={1} readOnly={ro}
                problem={problem('fingerprint')} warnings={warned('fingerprint')}
                placeholder={'resource_attributes["service.name"] or attributes["alertname"]'}
                hint="An OTTL value naming the incident an event belongs to: events with the same value join the same incident. Empty: one incident for the project." />
              <CodeField label="Resolve when" value={draft.incident.resolve_when} onInput={setInc('resolve_when')} readOnly={ro}
                problem={problem('resolve_when')} warnings={warned('resolve_when')} placeholder={'attributes["status"] == "resolved"'}
                hint="An OTTL condition: an event matching it resolves the open incident of its fingerprint (it never opens one). Empty: incidents resolve when quiet, or by hand." />
              <div class="grid-fields">
                <DurationField label="Group wait" value={draft.incident.group_wait} onInput={setInc('group_wait')} placeholder="30s"
                  readOnly={ro} problem={problem('group_wait')}
                  hint="The opening call waits this long after the incident opens, so the first events arrive together. 0 to 1h." />
                <DurationField label="Group interval" value={draft.incident.group_interval} onInput={setInc('group_interval')} placeholder="5m"
                  readOnly={ro} problem={problem('group_interval')}
                  hint="At most one update call per incident this often, only when new events arrived. 1s to 24h." />
                <DurationField label="Resolve after" value={draft.incident.resolve_after} onInput={setInc('resolve_after')} placeholder="30m"
                  readOnly={ro} problem={problem('resolve_after')}
                  hint="No new events for this long resolves the incident. 1s to 168h (7 days)." />
                <DurationField label="Reopen within" value={draft.incident.reopen_within} onInput={setInc('reopen_within')} placeholder="off"
                  readOnly={ro} problem={problem('reopen_within')}
                  hint="A matching event this soon after resolution reopens the same incident instead of opening a new one. 0 to 168h (7 days); empty: off." />
              </div>
              <p class="hint">Durations are written like <code>30s</code>, <code>5m</code>, <code>1h</code>; empty uses the default shown.</p>
            </div>
          )}
          <div class="grid-fields">
            {draft.mode === 'legacy' && (
              <NumberField label="Batch size" unit="events" hint="The most events in one call (1 to 1000)." value={draft.numbers.batch_size} onInput={setNum('batch_size')}
                placeholder="10" min={1} max={1000} readOnly={ro} problem={problem('batch_size')} />
            )}
            {draft.mode !== 'legacy' && (
              <>
                <NumberField label="Window duration" unit="seconds" hint="How far back the window reaches." value={draft.numbers.window_duration_seconds}
                  onInput={setNum('window_duration_seconds')} placeholder="300" min={1} max={604800} readOnly={ro}
                  problem={problem('window_duration_seconds')} />
                <NumberField label="Window max events" unit="events" hint="The newest are kept. Empty: 5,000." value={draft.numbers.window_max_events}
                  onInput={setNum('window_max_events')} placeholder="default" min={0} max={50000} readOnly={ro}
                  problem={problem('window_max_events')} />
                <NumberField label="Window max bytes" unit="bytes" hint="Of the window as JSON, at least 8,192. Empty: 400,000." value={draft.numbers.window_max_bytes}
                  onInput={setNum('window_max_bytes')} placeholder="default" min={0} max={10000000} readOnly={ro}
                  problem={problem('window_max_bytes')} />
              </>
            )}
          </div>
          {!incidentMode && <CodeField label="Group key" value={draft.group_key} onInput={set('group_key')} rows={1} readOnly={ro}
            problem={problem('group_key')} warnings={warned('group_key')} placeholder={'traceId or resource_attributes["k8s.pod.name"]'}
            hint="An OTTL value: events with the same value are sent together. Empty: one group." />}
        </section>

        <section class="panel" aria-labelledby="pl-guard">
          <h2 id="pl-guard">Guardrails</h2>
          <p class="hint">Keep a noisy incident from calling the agent hundreds of times. 0 or empty turns each off.</p>
          <div class="grid-fields">
            {!incidentMode && (
              <NumberField label="Cooldown" unit="seconds" hint="After a call, the same key is not called again for this long." value={draft.numbers.cooldown_seconds}
                onInput={setNum('cooldown_seconds')} placeholder="off" min={0} max={86400} readOnly={ro}
                problem={problem('cooldown_seconds')} />
            )}
            <NumberField label="Max calls per minute" unit="calls" hint="For the whole project." value={draft.numbers.max_calls_per_minute}
              onInput={setNum('max_calls_per_minute')} placeholder="no limit" min={0} max={10000} readOnly={ro}
              problem={problem('max_calls_per_minute')} />
            <NumberField label="Max calls per day" unit="calls" hint="For the whole project." value={draft.numbers.max_calls_per_day}
              onInput={setNum('max_calls_per_day')} placeholder="no limit" min={0} max={1000000} readOnly={ro}
              problem={problem('max_calls_per_day')} />
          </div>
          {!incidentMode && <CodeField label="Dedup key" value={draft.dedup_key} onInput={set('dedup_key')} rows={1} readOnly={ro}
            problem={problem('dedup_key')} warnings={warned('dedup_key')} placeholder={'resource_attributes["k8s.pod.name"]'}
            hint="An OTTL value: the cooldown applies per value. Empty: the group key in window mode, the project in batches." />}
          {incidentMode && <p class="hint">In incident mode, group interval spaces an incident’s calls; these limits cap the project’s.</p>}
        </section>

        <section class="panel" aria-labelledby="pl-agent">
          <h2 id="pl-agent">Agent</h2>
          <TextField label="Agent endpoint URL" value={draft.agent_endpoint_url} onInput={set('agent_endpoint_url')}
            readOnly={ro} placeholder="https://agent.example.com/hooks/otel"
            problem={problem('agent_endpoint_url')}
            hint="Where matching events are POSTed, signed with the signing secret below. Empty: the project is not consumed from." />
          <p class="hint">New events go to the agent as they arrive; stored ones only when you ask: <a href={`/projects/${encodeURIComponent(project.id)}/backlog`}>Process stored events</a>.</p>
        </section>

        {unplaced.map((p) => <Problem key={p.field} id={`problem-${p.field}`} problem={p} />)}
        <ErrorMessage error={checkError} />
        <ErrorMessage error={saveError} />
        {writable && (
          <div class="save-bar">
            <button type="submit" class="btn btn-primary" disabled={saving || !dirty || problems.length > 0}>
              {saving ? 'Saving…' : 'Save pipeline'}
            </button>
            {dirty && (
              <button type="button" class="btn" onClick={() => (setDraft(toDraft(saved)), setDirty(false), setProblems([]), setWarnings([]))}>
                Discard changes
              </button>
            )}
            {status}
            <a class="small" href="#try-it">Try it on recent events ↓</a>
            {savedNote && !dirty && <span class="check-status check-ok" role="status">✓ Saved: collectors use it now</span>}
          </div>
        )}
      </form>
      <LeaveDialog open={leaving !== null} onStay={() => setLeaving(null)}
        onLeave={() => {
          const go = leaving;
          setLeaving(null);
          go?.();
        }} />
      <TryIt project={project} pipeline={toBody(draft)} blocked={writable && problems.length > 0} />
      <SigningSecret project={project} secret={saved.signing_secret} onRotated={(p) => setSaved({ ...saved, ...p })} />
    </>
  );
}

function NumberField(props: {
  label: string;
  unit: string;
  hint: string;
  value: string;
  onInput: (v: string) => void;
  placeholder: string;
  min: number;
  max: number;
  readOnly: boolean;
  problem?: PipelineProblem;
}) {
  const id = useId();
  return (
    <div class="field field-number">
      <label for={id}>{props.label}</label>
      <div class="with-unit">
        <input id={id} type="number" inputMode="numeric" min={props.min} max={props.max} value={props.value}
          placeholder={props.placeholder} readOnly={props.readOnly} aria-invalid={props.problem ? 'true' : undefined}
          aria-describedby={`${id}-unit ${id}-hint${props.problem ? ` ${id}-problem` : ''}`}
          onInput={(e) => props.onInput(e.currentTarget.value)} />
        <span id={`${id}-unit`} class="muted small">{props.unit}</span>
      </div>
      <p id={`${id}-hint`} class="hint">{props.hint}</p>
      {props.problem && <Problem id={`${id}-problem`} problem={props.problem} />}
    </div>
  );
}

function DurationField(props: {
  label: string;
  value: string;
  onInput: (v: string) => void;
  placeholder: string;
  hint: string;
  readOnly: boolean;
  problem?: PipelineProblem;
}) {
  const id = useId();
  return (
    <div class={'field field-duration' + (props.problem ? ' has-problem' : '')}>
      <label for={id}>{props.label}</label>
      <input id={id} type="text" class="mono" value={props.value} placeholder={props.readOnly ? undefined : props.placeholder}
        readOnly={props.readOnly} spellcheck={false} autocomplete="off" aria-invalid={props.problem ? 'true' : undefined}
        aria-describedby={`${id}-hint${props.problem ? ` ${id}-problem` : ''}`}
        onInput={(e) => props.onInput(e.currentTarget.value)} />
      <p id={`${id}-hint`} class="hint">
        {props.hint} Default: <code>{props.placeholder}</code>.
      </p>
      {props.problem && <Problem id={`${id}-problem`} problem={props.problem} />}
    </div>
  );
}

function TextField(props: {
  label: string;
  value: string;
  onInput: (v: string) => void;
  readOnly: boolean;
  placeholder?: string;
  hint?: string;
  problem?: PipelineProblem;
}) {
  const id = useId();
  return (
    <div class={'field' + (props.problem ? ' has-problem' : '')}>
      <label for={id}>{props.label}</label>
      <input id={id} type="url" value={props.value} placeholder={props.placeholder}
        readOnly={props.readOnly} aria-invalid={props.problem ? 'true' : undefined}
        aria-describedby={`${id}-hint${props.problem ? ` ${id}-problem` : ''}`}
        onInput={(e) => props.onInput(e.currentTarget.value)} />
      {props.hint && <p id={`${id}-hint`} class="hint">{props.hint}</p>}
      {props.problem && <Problem id={`${id}-problem`} problem={props.problem} />}
    </div>
  );
}

/** Reveal (owners and admins: the API sends it only to them), copy, rotate. */
function SigningSecret({ project, secret, onRotated }: {
  project: Project;
  secret?: string;
  onRotated: (p: Pipeline) => void;
}) {
  const base = `/projects/${encodeURIComponent(project.id)}/pipeline`;
  const [shown, setShown] = useState(false);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [rotated, setRotated] = useState(false);
  const rotate = async () => {
    setBusy(true);
    setError(null);
    try {
      onRotated(await api<Pipeline>('POST', base + '/rotate-secret'));
      setConfirming(false);
      setRotated(true);
      setShown(true);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="panel" aria-labelledby="pl-secret">
      <h2 id="pl-secret">Signing secret</h2>
      <p class="hint">
        Calls to the agent and webhook destinations carry Standard Webhooks signatures (<code>webhook-signature</code>)
        made with this secret; verify them on your side.
      </p>
      {!canWrite(project.role) || !secret ? (
        <p class="muted">Only the project's owner and admins see the signing secret.</p>
      ) : (
        <>
          <div class="copy-row">
            <label class="sr-only" for="signing-secret">
              Signing secret
            </label>
            <input id="signing-secret" class="mono" readOnly value={shown ? secret : 'whsec_' + '•'.repeat(32)}
              aria-describedby="secret-state" />
            <span id="secret-state" class="sr-only">{shown ? 'shown' : 'hidden'}</span>
            <button type="button" class="btn btn-small" aria-pressed={shown} onClick={() => setShown(!shown)}>
              {shown ? 'Hide' : 'Reveal'}
            </button>
            <CopyButton text={secret} label="Copy the signing secret" />
            <button type="button" class="btn btn-small btn-danger-quiet" onClick={() => (setError(null), setConfirming(true))}>
              Rotate
            </button>
          </div>
          {rotated && <Notice>The secret was rotated. Calls are signed with the new one from now on.</Notice>}
        </>
      )}
      <ConfirmDialog open={confirming} title="Rotate the signing secret?" confirmLabel="Rotate secret" busy={busy}
        error={error} onConfirm={rotate} onCancel={() => setConfirming(false)}>
        <p>Calls are signed with a new secret at once; receivers that verify with the old one refuse them until updated.</p>
      </ConfirmDialog>
    </section>
  );
}

/** Asks before an in-app navigation drops unsaved edits; Stay is the default (Esc). */
function LeaveDialog({ open, onStay, onLeave }: { open: boolean; onStay: () => void; onLeave: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  return (
    <dialog ref={ref} aria-labelledby={titleId} onCancel={(e) => (e.preventDefault(), onStay())}>
      <h2 id={titleId}>Leave without saving?</h2>
      <p>The pipeline has changes that are not saved. Leaving this page discards them.</p>
      <div class="actions">
        <button type="button" class="btn btn-danger" onClick={onLeave}>
          Leave without saving
        </button>
        <button type="button" class="btn btn-primary" onClick={onStay} autoFocus>
          Stay
        </button>
      </div>
    </dialog>
  );
}
