package sourcepreset

import (
	"fmt"
	"net/http"
	"strings"
)

// splitStripe reads one Stripe event (https://docs.stripe.com/api/events/object). Stripe
// retries a delivery with the same event, so its id is the dedup id.
func splitStripe(h http.Header, body []byte, _ limits) ([]Event, error) {
	doc, err := decodeObject(Stripe, body)
	if err != nil {
		return nil, err
	}
	typ := str(doc["type"])
	if typ == "" {
		return nil, fail(Stripe, "the event has no type; this URL takes Stripe webhook events")
	}
	ev := Event{Payload: body, EventType: typ, Labels: map[string]string{}, Headers: keepHeaders(h, "User-Agent")}
	// created is unix seconds in API events, an RFC 3339 string in v2 (thin) events.
	ev.Time = firstTime(doc["created"])
	ev.DedupID = dedupID(str(doc["id"]))
	obj := get(doc, "data", "object")
	setLabel(ev.Labels, "object", str(get(obj, "object")))
	setLabel(ev.Labels, "livemode", str(doc["livemode"]))
	setLabel(ev.Labels, "account", str(doc["account"]))
	id := str(get(obj, "id"))
	if id == "" {
		id = str(get(doc, "related_object", "id"))
	}
	ev.Text = typ
	if id != "" {
		ev.Text += " " + id
	}
	if amount, cur := str(get(obj, "amount")), str(get(obj, "currency")); amount != "" && cur != "" {
		ev.Text += fmt.Sprintf(" (%s %s)", amount, strings.ToUpper(cur))
	}
	ev.Text = oneLine(ev.Text)
	return []Event{ev}, nil
}

// sentryHeaders are the headers Sentry documents
// (https://docs.sentry.io/integrations/integration-platform/webhooks/#headers), less
// Sentry-Hook-Signature.
var sentryHeaders = []string{"Request-ID", "Sentry-Hook-Resource", "Sentry-Hook-Timestamp", "User-Agent"}

// splitSentry reads one Sentry integration-platform webhook: the resource is in the
// Sentry-Hook-Resource header, the action in the body.
func splitSentry(h http.Header, body []byte, _ limits) ([]Event, error) {
	resource := strings.TrimSpace(h.Get("Sentry-Hook-Resource"))
	if resource == "" {
		return nil, fail(Sentry, "the request has no Sentry-Hook-Resource header; this URL takes Sentry integration webhooks")
	}
	doc, err := decodeObject(Sentry, body)
	if err != nil {
		return nil, err
	}
	ev := Event{Payload: body, EventType: resource, Labels: map[string]string{}, Headers: keepHeaders(h, sentryHeaders...)}
	action := str(doc["action"])
	if action != "" {
		ev.EventType = resource + "." + action
	}
	ev.DedupID = dedupID(strings.TrimSpace(h.Get("Request-ID")))
	data := get(doc, "data")
	// Each resource's object sits under data by its own name; "event_alert" is
	// data.event, and an issue's firstSeen is its time only when it was just created.
	var obj any
	switch resource {
	case "event_alert":
		obj = get(data, "event")
	default:
		obj = get(data, resource)
	}
	var created any
	if resource == "issue" && action == "created" {
		created = get(obj, "firstSeen")
	}
	ev.Time = firstTime(get(obj, "datetime"), get(obj, "date_detected"), get(obj, "dateCreated"), created, get(data, "timestamp"), h.Get("Sentry-Hook-Timestamp"))
	title := str(get(obj, "title"))
	if title == "" {
		title = str(get(data, "description_title"))
	}
	ev.Text = oneLine(strings.TrimSpace(strings.ReplaceAll(ev.EventType, ".", " ") + ": " + title))
	if title == "" {
		ev.Text = strings.ReplaceAll(ev.EventType, ".", " ")
	}
	setLabel(ev.Labels, "project", str(get(obj, "project", "slug")))
	if ev.Labels["project"] == "" {
		setLabel(ev.Labels, "project", str(get(obj, "project")))
	}
	setLabel(ev.Labels, "level", str(get(obj, "level")))
	setLabel(ev.Labels, "actor", str(get(doc, "actor", "name")))
	return []Event{ev}, nil
}

// splitPagerDuty reads one PagerDuty v3 webhook
// (https://developer.pagerduty.com/docs/webhooks-overview): {"event": {...}}.
func splitPagerDuty(h http.Header, body []byte, _ limits) ([]Event, error) {
	doc, err := decodeObject(PagerDuty, body)
	if err != nil {
		return nil, err
	}
	e, ok := doc["event"].(map[string]any)
	if !ok {
		return nil, fail(PagerDuty, "the body has no event object; this URL takes PagerDuty v3 webhooks")
	}
	typ := str(e["event_type"])
	if typ == "" {
		return nil, fail(PagerDuty, "event.event_type is missing; this URL takes PagerDuty v3 webhooks")
	}
	ev := Event{Payload: body, EventType: typ, Labels: map[string]string{},
		Headers: keepHeaders(h, "X-Webhook-Id", "X-Webhook-Subscription", "User-Agent")}
	ev.Time = firstTime(e["occurred_at"])
	ev.DedupID = dedupID(str(e["id"]))
	data := e["data"]
	setLabel(ev.Labels, "resource_type", str(e["resource_type"]))
	setLabel(ev.Labels, "service", str(get(data, "service", "summary")))
	setLabel(ev.Labels, "agent", str(get(e, "agent", "summary")))
	setLabel(ev.Labels, "status", str(get(data, "status")))
	title := str(get(data, "title"))
	if title == "" {
		title = str(get(data, "summary"))
	}
	if n := str(get(data, "number")); n != "" && title != "" {
		title = "#" + n + " " + title
	}
	ev.Text = typ
	if title != "" {
		ev.Text += ": " + title
	}
	ev.Text = oneLine(ev.Text)
	return []Event{ev}, nil
}
