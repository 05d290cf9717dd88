// What the owner pastes where in the sender's settings, with this source's values filled in.
// The credential is known only in the answer that creates or rotates it; elsewhere the
// steps say where it was shown instead of a value.
import type { ComponentChildren } from 'preact';
import { CopyButton } from '../ui';
import { alertmanagerYAML, type Provider, type Verification } from './providers';

/** A value to paste, with its copy button. */
function Paste({ label, value }: { label: string; value: string }) {
  return (
    <span class="paste">
      <code aria-label={label}>{value}</code> <CopyButton text={value} label={`Copy ${label.toLowerCase()}`} />
    </span>
  );
}

function Step({ where, children }: { where: string; children?: ComponentChildren }) {
  return (
    <li>
      <span class="step-where">{where}</span> {children}
    </li>
  );
}

export function SetupSteps(props: {
  provider: Provider;
  url: string;
  verification: Verification | null | undefined;
  /** The secret, password or token in the clear: only right after create or rotate. */
  credential: string | null;
}) {
  const { provider: p, url, verification: v, credential } = props;
  const hidden = '(the one shown when you created or rotated it)';
  const secret = credential ? <Paste label="Secret" value={credential} /> : <em>{hidden}</em>;
  const urlPaste = <Paste label="Payload URL" value={url} />;
  const username = v?.username ?? '';
  const steps: ComponentChildren[] = [];
  switch (p.id) {
    case 'github':
      steps.push(
        <Step where="GitHub → the repository or organization → Settings → Webhooks → Add webhook." />,
        <Step where="Payload URL:">{urlPaste}</Step>,
        <Step where="Content type:"><Paste label="Content type" value="application/json" /></Step>,
        <Step where="Secret:">{secret}</Step>,
        <Step where="Which events:">
          “Let me select individual events”: Pushes, Pull requests, Issues, Workflow runs, Check runs (or “Send me
          everything”; each becomes an event typed like <code>pull_request.opened</code>).
        </Step>,
        <Step where="Add webhook.">GitHub sends a <code>ping</code> at once; it shows as an event of type <code>ping</code>.</Step>,
      );
      break;
    case 'stripe':
      steps.push(
        <Step where="Stripe → Developers → Webhooks → Add endpoint." />,
        <Step where="Endpoint URL:">{urlPaste}</Step>,
        <Step where="Select events:">the events you want (e.g. <code>payment_intent.payment_failed</code>, <code>invoice.paid</code>).</Step>,
        <Step where="Signing secret:">
          {v?.secret_set || credential
            ? 'set: the source checks every Stripe-Signature with it.'
            : 'reveal it on the endpoint’s page (whsec_…) and paste it back here.'}
        </Step>,
      );
      break;
    case 'alertmanager': {
      const yaml = alertmanagerYAML(url, username || 'alertmanager', credential ?? '<the password shown when you created the source>');
      steps.push(
        <Step where="alertmanager.yml:">
          add this receiver and route alerts to it (<code>route: receiver: otelcol-svc</code>, or a child route).
          <div class="copy-row copy-row-top">
            <pre class="code" aria-label="Alertmanager receiver (YAML)">{yaml}</pre>
            <CopyButton text={yaml} label="Copy the Alertmanager receiver" />
          </div>
        </Step>,
        <Step where="Reload Alertmanager">(<code>POST /-/reload</code> or SIGHUP). Each alert of a notification becomes its own event.</Step>,
      );
      break;
    }
    case 'grafana':
      steps.push(
        <Step where="Grafana → Alerting → Contact points → Add contact point, Integration: Webhook." />,
        <Step where="URL:">{urlPaste}</Step>,
        <Step where="HTTP Method:">POST</Step>,
        <Step where="Optional Webhook settings → HTTP Basic Authentication → Username:"><Paste label="Username" value={username} /></Step>,
        <Step where="Password:">{credential ? <Paste label="Password" value={credential} /> : <em>{hidden}</em>}</Step>,
        <Step where="Test, then Save">and use the contact point in a notification policy. Each alert becomes its own event.</Step>,
      );
      break;
    case 'sentry':
      steps.push(
        <Step where="Sentry → Settings → Developer Settings → Custom Integrations → Create New Integration → Internal Integration." />,
        <Step where="Webhook URL:">{urlPaste}</Step>,
        <Step where="Alert Rule Action on, and under Webhooks tick">issue (and error, if you want every error).</Step>,
        <Step where="Save Changes, then Credentials → Client Secret:">
          {v?.secret_set || credential ? 'set: the source checks every Sentry-Hook-Signature with it.' : 'paste it back here.'}
        </Step>,
      );
      break;
    case 'pagerduty':
      steps.push(
        <Step where="PagerDuty → Integrations → Generic Webhooks (v3) → New Webhook." />,
        <Step where="Webhook URL:">{urlPaste}</Step>,
        <Step where="Scope Type:">Account, a service or a team; Event Subscription: the incident events you want.</Step>,
        <Step where="Add Webhook: PagerDuty shows the secret once:">
          {v?.secret_set || credential ? 'set: the source checks every X-PagerDuty-Signature with it.' : 'paste it back here.'}
        </Step>,
      );
      break;
    case 'cloudevents':
      steps.push(
        <Step where="Sink / target URL (the token in its path is the credential):">
          {v?.scheme === 'url_token' && !credential ? <em>the URL with the token, shown when you created or rotated it</em> : urlPaste}
        </Step>,
        <Step where="Content type:">
          <code>application/cloudevents+json</code> (one event), <code>application/cloudevents-batch+json</code> (a
          batch), or binary mode (<code>ce-*</code> headers, the data as the body).
        </Step>,
        <Step where="Each event:">its <code>type</code> becomes the event type, <code>source</code> the source, <code>id</code> keeps retries from being stored twice.</Step>,
      );
      break;
    case 'slack':
      steps.push(
        <Step where="api.slack.com → your app → Basic Information → App Credentials → Signing Secret:">
          {v?.secret_set || credential ? 'set: the source checks every X-Slack-Signature with it.' : 'paste it here first.'}
        </Step>,
        <Step where="Event Subscriptions → Request URL:">
          {urlPaste} Slack then sends a signed <code>url_verification</code> challenge; the source answers it (storing
          nothing) once the signing secret is set, and Slack marks the URL Verified.
        </Step>,
      );
      break;
    default:
      steps.push(...otherSteps(url, v, credential, hidden));
  }
  return (
    <ol class="setup-steps" aria-label={`Set up ${p.name}`}>
      {steps}
    </ol>
  );
}

function otherSteps(url: string, v: Verification | null | undefined, credential: string | null, hidden: string): ComponentChildren[] {
  const urlPaste = <Paste label="Payload URL" value={url} />;
  const cred = (label: string) => (credential ? <Paste label={label} value={credential} /> : <em>{hidden}</em>);
  switch (v?.scheme) {
    case 'hmac': {
      const enc = v.encoding || 'hex';
      const alg = v.algorithm || 'sha256';
      return [
        <Step where="POST JSON to:">{urlPaste}</Step>,
        <Step where={`Sign the raw body with HMAC-${alg.toUpperCase()} and this secret:`}>{cred('Secret')}</Step>,
        <Step where="Send the signature in the header">
          <code>{v.header}</code> as {v.prefix ? <code>{v.prefix}</code> : null}&lt;{enc} digest&gt;.
        </Step>,
      ];
    }
    case 'basic':
      return [
        <Step where="POST JSON to:">{urlPaste}</Step>,
        <Step where="HTTP Basic user:"><Paste label="Username" value={v.username ?? ''} /></Step>,
        <Step where="Password:">{cred('Password')}</Step>,
      ];
    case 'url_token':
      return [
        <Step where="POST JSON to this URL; the token in its path is the credential, so treat the whole URL as a secret:">
          {credential ? urlPaste : <em>the URL with the token, shown when you created or rotated it</em>}
        </Step>,
      ];
    default:
      return [
        <Step where="POST JSON to:">{urlPaste}</Step>,
        <Step where="with the header">
          <code>Authorization: Bearer &lt;the source’s API key&gt;</code>
        </Step>,
      ];
  }
}
