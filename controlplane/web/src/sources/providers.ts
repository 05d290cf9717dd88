// The senders a push source can be set up for: what each one's preset and verification
// are, what the owner pastes where in the sender's settings, and a sample of what it sends
// for the Test. The JSON samples are copies of internal/sourcepreset/testdata (a Go test,
// controlplane/web/samples_test.go, fails when they drift apart), so the dashboard tests
// with the very payloads the presets are tested with.
import alertmanager from './samples/alertmanager.json';
import githubPR from './samples/github_pull_request.json';
import grafana from './samples/grafana.json';
import pagerduty from './samples/pagerduty_incident.json';
import sentry from './samples/sentry_issue.json';
import stripe from './samples/stripe_event.json';

/** The verification schemes of internal/sourceverify, as "scheme" spells them. */
export type Scheme = 'github' | 'stripe' | 'standard_webhooks' | 'sentry' | 'pagerduty' | 'slack' | 'hmac' | 'basic' | 'url_token';

/** The "verification" object (docs/contract.md#section-5); only what the scheme reads. */
export interface Verification {
  scheme: Scheme;
  secret?: string;
  username?: string;
  password?: string;
  header?: string;
  algorithm?: string;
  encoding?: string;
  prefix?: string;
  secret_set?: boolean;
}

export type ProviderId = 'github' | 'stripe' | 'alertmanager' | 'grafana' | 'sentry' | 'pagerduty' | 'cloudevents' | 'slack' | 'other';

/** How an "Other" sender proves itself. */
export type OtherAuth = 'hmac' | 'basic' | 'url_token' | 'api_key';

export interface Provider {
  id: ProviderId;
  name: string;
  /** One line under the name in the picker. */
  blurb: string;
  /** The preset that reads its payloads; "" keeps the source's own mapping. */
  preset: string;
  /** Its scheme; undefined for "Other", whose form picks one. */
  scheme?: Scheme;
  /** The sender issues the secret (the owner pastes it here) rather than us generating it. */
  issued?: { label: string; hint: string; placeholder: string };
  /** The sample the Test starts from, and the headers the sender would send with it. */
  sample: string;
  headers: string;
  /** The source name the form suggests. */
  suggestedName: string;
}

const json = (v: unknown) => JSON.stringify(v, null, 2);

export const otherSample = '{\n  "action": "opened",\n  "repo": {"name": "web"},\n  "sender": {"login": "ada"}\n}';

const cloudEventSample = json({
  specversion: '1.0',
  type: 'com.example.order.created',
  source: '/shop/orders',
  id: 'A234-1234-1234',
  time: '2026-04-01T12:00:00Z',
  subject: 'order-1042',
  datacontenttype: 'application/json',
  data: { order: 1042, total: 99.5, currency: 'EUR' },
});

const slackSample = json({
  token: 'unused',
  team_id: 'T0001',
  type: 'event_callback',
  event_id: 'Ev0PV52K21',
  event_time: 1775044800,
  event: { type: 'app_mention', user: 'U061F7AUR', text: '<@U0LAN0Z89> is the deploy done?', channel: 'C0LAN2Q65' },
});

export const providers: Provider[] = [
  {
    id: 'github', name: 'GitHub', blurb: 'Pushes, PRs, workflow runs',
    preset: 'github', scheme: 'github', sample: json(githubPR), suggestedName: 'github',
    headers: 'X-GitHub-Event: pull_request\nX-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958',
  },
  {
    id: 'stripe', name: 'Stripe', blurb: 'Payments, invoices, subscriptions',
    preset: 'stripe', scheme: 'stripe', sample: json(stripe), suggestedName: 'stripe', headers: '',
    issued: { label: 'Signing secret', placeholder: 'whsec_…',
      hint: 'Stripe shows it on the endpoint’s page (Developers → Webhooks → your endpoint → Signing secret → Reveal).' },
  },
  {
    id: 'alertmanager', name: 'Alertmanager', blurb: 'One event per alert',
    preset: 'alertmanager', scheme: 'basic', sample: json(alertmanager), suggestedName: 'alertmanager', headers: '',
  },
  {
    id: 'grafana', name: 'Grafana', blurb: 'Contact point, one event per alert',
    preset: 'grafana', scheme: 'basic', sample: json(grafana), suggestedName: 'grafana', headers: '',
  },
  {
    id: 'sentry', name: 'Sentry', blurb: 'Issues and alerts',
    preset: 'sentry', scheme: 'sentry', sample: json(sentry), suggestedName: 'sentry',
    headers: 'Sentry-Hook-Resource: issue\nRequest-ID: 7d2b6c06-3b1c-4e33-9b8a-0c4d8b1b6f40',
    issued: { label: 'Client secret', placeholder: 'the integration’s client secret',
      hint: 'Sentry shows it on the internal integration’s page (Settings → Developer Settings → your integration → Credentials).' },
  },
  {
    id: 'pagerduty', name: 'PagerDuty', blurb: 'Incident events (v3 webhooks)',
    preset: 'pagerduty', scheme: 'pagerduty', sample: json(pagerduty), suggestedName: 'pagerduty', headers: '',
    issued: { label: 'Signing secret', placeholder: 'the subscription’s secret',
      hint: 'PagerDuty shows it once, right after you add the webhook subscription.' },
  },
  {
    id: 'cloudevents', name: 'CloudEvents', blurb: 'Any CloudEvents 1.0 producer',
    preset: 'cloudevents', scheme: 'url_token', sample: cloudEventSample, suggestedName: 'cloudevents',
    headers: 'Content-Type: application/cloudevents+json',
  },
  {
    id: 'slack', name: 'Slack', blurb: 'Signature check, your mapping',
    preset: '', scheme: 'slack', sample: slackSample, suggestedName: 'slack', headers: '',
    issued: { label: 'Signing secret', placeholder: 'the app’s signing secret',
      hint: 'Slack shows it under your app’s Basic Information → App Credentials → Signing Secret.' },
  },
  {
    id: 'other', name: 'Other', blurb: 'HMAC, Basic, URL token, API key',
    preset: '', sample: otherSample, suggestedName: '', headers: '',
  },
];

export function provider(id: ProviderId): Provider {
  return providers.find((p) => p.id === id)!;
}

/** The name a scheme goes by in the dashboard. */
export function schemeName(s: Scheme | undefined): string {
  switch (s) {
    case 'github': return 'GitHub signature';
    case 'stripe': return 'Stripe signature';
    case 'standard_webhooks': return 'Standard Webhooks signature';
    case 'sentry': return 'Sentry signature';
    case 'pagerduty': return 'PagerDuty signature';
    case 'slack': return 'Slack signature';
    case 'hmac': return 'HMAC header';
    case 'basic': return 'HTTP Basic';
    case 'url_token': return 'URL token';
    default: return 'API key';
  }
}

/** The provider a saved source was most likely made for, from its preset and scheme. */
export function providerOf(preset: string | undefined, scheme: Scheme | undefined): ProviderId {
  if (preset) return preset as ProviderId;
  if (scheme === 'slack') return 'slack';
  return 'other';
}

/** Whether the scheme's secret is issued by the sender (pasted here) rather than generated. */
export function issuedByProvider(s: Scheme | undefined): boolean {
  return s === 'stripe' || s === 'sentry' || s === 'pagerduty' || s === 'slack';
}

/** The credential the create and rotate answers show once, and what it is called. */
export function credentialOf(v: Verification | undefined): { label: string; value: string } | null {
  // A secret the sender issued was pasted here: the owner has it, showing it back only
  // puts it on screen once more.
  if (!v || issuedByProvider(v.scheme)) return null;
  if (v.scheme === 'basic' && v.password) return { label: 'Password', value: v.password };
  if (v.scheme === 'url_token' && v.secret) return { label: 'URL token', value: v.secret };
  if (v.secret) return { label: 'Secret', value: v.secret };
  return null;
}

/** Headers typed one per line as "Name: value", for the Test. */
export function parseHeaders(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const i = line.indexOf(':');
    if (i <= 0) continue;
    const name = line.slice(0, i).trim();
    if (name) out[name] = line.slice(i + 1).trim();
  }
  return out;
}

/** The Alertmanager receiver that sends to a source, Basic credentials filled in. */
export function alertmanagerYAML(url: string, username: string, password: string): string {
  return (
    'receivers:\n' +
    '  - name: otelcol-svc\n' +
    '    webhook_configs:\n' +
    `      - url: '${url}'\n` +
    '        send_resolved: true\n' +
    '        http_config:\n' +
    '          basic_auth:\n' +
    `            username: '${username}'\n` +
    `            password: '${password}'\n`
  );
}
