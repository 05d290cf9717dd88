// From the Fields view's paths to OTTL (package ottlevent's paths). The console lists
// a field as its keys joined with dots (attributes.http.method), which cannot tell a key
// holding dots from nested objects, so the keys are looked up in the sampled records
// themselves; only a path none of them has is split by rule. Receivers now answer each
// field's "ottl" themselves (internal/fieldstats, the same rules), which the Fields page
// prefers: this stays for receivers that predate it.

import rules from './generated/ottlpaths.json';

export type Key = string | number;

const MAX_DEPTH = 32;
const MAX_PATHS = 4000;

/** The console's path of each field in records (as fields.go joins them), to its keys. */
export function pathKeys(records: unknown[]): Map<string, Key[]> {
  const out = new Map<string, Key[]>();
  const walk = (v: unknown, path: string, keys: Key[], depth: number) => {
    if (depth > MAX_DEPTH || out.size >= MAX_PATHS) return;
    if (depth > 0 && !out.has(path)) out.set(path, keys);
    if (Array.isArray(v)) {
      for (const el of v) walk(el, path + '[]', [...keys, 0], depth + 1);
    } else if (v && typeof v === 'object') {
      for (const [k, el] of Object.entries(v)) walk(el, depth === 0 ? k : `${path}.${k}`, [...keys, k], depth + 1);
    }
  };
  for (const r of records) walk(r, '', [], 0);
  return out;
}

/** Containers whose keys are conventionally dotted names (OpenTelemetry attributes). */
const dottedMaps = new Set(['attributes', 'resourceAttributes', 'resource_attributes']);

/** The keys of a path no sampled record has: attributes keep the rest as one key. */
export function splitPath(path: string): Key[] {
  const keys: Key[] = [];
  const parts = path.split('.');
  for (let i = 0; i < parts.length; i++) {
    let p = parts[i];
    if (i === 1 && dottedMaps.has(String(keys[0])) && parts.length > 2) p = parts.slice(1).join('.');
    let n = 0;
    while (p.endsWith('[]')) {
      p = p.slice(0, -2);
      n++;
    }
    keys.push(p);
    for (let j = 0; j < n; j++) keys.push(0);
    if (p !== parts[i]) break;
  }
  return keys;
}

// The path rules of the pipeline's OTTL context, generated from the Go source
// (internal/ottlpath: `go generate ./internal/ottlpath`), so the dashboard writes the
// paths the pipeline reads: camelCase log fields by their aliases, and the bare names
// that mean something else than the record's field of that name.
const aliases: Record<string, string> = rules.aliases;
const taken = new Set([rules.context, rules.signal, ...Object.values(rules.aliases), ...rules.keywords]);
const bare = new RegExp(rules.bare);

const quote = (k: string) => JSON.stringify(k);

/** An OTTL path of keys: attributes["http.method"], event["_event_type"], items[0]["sku"]. */
export function ottlPath(keys: Key[]): string {
  if (keys.length === 0) return rules.context;
  const [first, ...rest] = keys;
  let out: string;
  if (typeof first === 'string' && aliases[first]) out = aliases[first];
  else if (typeof first === 'string' && bare.test(first) && !taken.has(first)) out = first;
  else out = `${rules.context}[${typeof first === 'number' ? first : quote(first)}]`;
  for (const k of rest) out += `[${typeof k === 'number' ? k : quote(k)}]`;
  return out;
}

/** The trigger with a condition on the field added (and-ed to what is there). */
export function withCondition(trigger: string, path: string): string {
  const cond = `${path} != nil`;
  const t = trigger.trim();
  if (!t) return cond;
  return /\bor\b/.test(t) ? `(${t}) and ${cond}` : `${t} and ${cond}`;
}

// A field chosen on the Fields page, for the Pipeline page to put in its (unsaved) trigger.
const pending = new Map<string, string>();

export function offerToTrigger(projectId: string, path: string) {
  pending.set(projectId, path);
}

export function takeOffered(projectId: string): string | undefined {
  const p = pending.get(projectId);
  pending.delete(projectId);
  return p;
}
