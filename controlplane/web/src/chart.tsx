// Calls and failures over time, bucketed from the listed deliveries' created_at, as
// inline SVG (no chart library: the first-load budget). Failures are drawn hatched as
// well as red, and the legend and each bar's title say what they are in words.
import type { Delivery } from './console';

const steps = [60, 300, 900, 3600, 6 * 3600, 86400].map((s) => s * 1000);
const BUCKETS = 24;

export interface Bucket {
  start: number;
  calls: number;
  failures: number;
}

export const failed = (d: Delivery) => d.state === 'dead_lettered' || d.state === 'retrying';

/** At most BUCKETS buckets of a round width (a minute to a day) ending at now. */
export function bucket(ds: Delivery[], now = Date.now()): { width: number; buckets: Bucket[] } {
  const times = ds.map((d) => Date.parse(d.created_at)).filter((t) => !isNaN(t));
  const oldest = times.length ? Math.min(...times) : now;
  const width = steps.find((s) => (now - oldest) / s < BUCKETS) ?? steps[steps.length - 1];
  const end = Math.ceil(now / width) * width;
  const buckets: Bucket[] = [];
  for (let i = BUCKETS - 1; i >= 0; i--) buckets.push({ start: end - (i + 1) * width, calls: 0, failures: 0 });
  ds.forEach((d, i) => {
    const t = times[i] ?? Date.parse(d.created_at);
    const b = buckets[Math.floor((t - buckets[0].start) / width)];
    if (!b) return;
    b.calls++;
    if (failed(d)) b.failures++;
  });
  return { width, buckets };
}

const fmt = (ms: number, width: number) =>
  new Intl.DateTimeFormat(undefined, width >= 86400_000 ? { month: 'short', day: 'numeric' } : { hour: '2-digit', minute: '2-digit', hour12: false }).format(ms);

export function CallsChart({ deliveries }: { deliveries: Delivery[] }) {
  const { width, buckets } = bucket(deliveries);
  const max = Math.max(1, ...buckets.map((b) => b.calls));
  const W = 720, H = 150, pad = 24, bw = (W - pad) / buckets.length;
  const y = (n: number) => H - pad - (n / max) * (H - pad - 8);
  const total = buckets.reduce((a, b) => a + b.calls, 0);
  const fails = buckets.reduce((a, b) => a + b.failures, 0);
  return (
    <figure class="calls-chart">
      <figcaption>
        <span class="legend"><span class="swatch swatch-calls" aria-hidden="true" /> Deliveries</span>
        <span class="legend"><span class="swatch swatch-fail" aria-hidden="true" /> Failed (retrying or dead-lettered)</span>
        <span class="muted small">per {width >= 3600_000 ? `${width / 3600_000} h` : `${width / 60_000} min`}</span>
      </figcaption>
      <svg class="chart" viewBox={`0 0 ${W} ${H}`} role="img"
        aria-label={`${total} deliveries, ${fails} failed, in ${buckets.length} intervals of ${width / 60_000} minutes`}>
        <defs>
          <pattern id="hatch" width="5" height="5" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
            <rect width="5" height="5" class="hatch-bg" />
            <line x1="0" y1="0" x2="0" y2="5" class="hatch-line" />
          </pattern>
        </defs>
        <text x="0" y="12" class="chart-label">{max}</text>
        <line x1={pad} x2={W} y1={H - pad} y2={H - pad} class="chart-axis" />
        {buckets.map((b, i) => {
          const x = pad + i * bw + 2;
          return (
            <g key={b.start}>
              <title>{`${fmt(b.start, width)}: ${b.calls} deliveries, ${b.failures} failed`}</title>
              {b.calls > 0 && <rect x={x} width={bw - 4} y={y(b.calls)} height={H - pad - y(b.calls)} class="chart-bar" />}
              {b.failures > 0 && <rect x={x} width={bw - 4} y={y(b.failures)} height={H - pad - y(b.failures)} fill="url(#hatch)" class="chart-fail" />}
              {i % 4 === 0 && <text x={x} y={H - 8} class="chart-label">{fmt(b.start, width)}</text>}
            </g>
          );
        })}
      </svg>
    </figure>
  );
}
