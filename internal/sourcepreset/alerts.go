package sourcepreset

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// splitAlerts reads Alertmanager's webhook notification
// (https://prometheus.io/docs/alerting/latest/configuration/#webhook_config) and Grafana's,
// which has its shape plus fields of its own (orgId, title, state, message; per alert
// silenceURL, dashboardURL, panelURL, values, valueString).
func splitAlerts(preset string, h http.Header, body []byte, lim limits) ([]Event, error) {
	if len(body) == 0 || body[0] != '{' {
		return nil, fail(preset, "the body is not a JSON object; this URL takes %s webhook notifications", senderName(preset))
	}
	var top map[string]json.RawMessage
	if err := unmarshal(body, &top); err != nil {
		return nil, fail(preset, "the body is not valid JSON: %v", err)
	}
	rawAlerts, ok := top["alerts"]
	if !ok {
		return nil, fail(preset, "the body has no alerts[]; this URL takes %s webhook notifications", senderName(preset))
	}
	var alerts []json.RawMessage
	if err := json.Unmarshal(rawAlerts, &alerts); err != nil {
		return nil, fail(preset, "alerts is not an array of alerts")
	}
	if len(alerts) > lim.maxEvents {
		return nil, fail(preset, "the body holds %d alerts, more than the %d one request may carry; set max_alerts in the webhook config (Grafana: Max Alerts)", len(alerts), lim.maxEvents)
	}
	delete(top, "alerts")
	// Marshal writes the members in key order, each raw value compacted: the same group
	// for every alert of the notification.
	group, err := json.Marshal(top)
	if err != nil {
		return nil, fail(preset, "the body is not valid JSON: %v", err)
	}
	var groupKey, groupStatus string
	_ = json.Unmarshal(top["groupKey"], &groupKey)
	_ = json.Unmarshal(top["status"], &groupStatus)

	headers := keepHeaders(h, "User-Agent")
	events := make([]Event, 0, len(alerts))
	total := 0
	for i, raw := range alerts {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || raw[0] != '{' {
			return nil, fail(preset, "alerts[%d] is not an object", i)
		}
		var alert map[string]any
		if err := unmarshal(raw, &alert); err != nil {
			return nil, fail(preset, "alerts[%d]: %v", i, err)
		}
		status := str(alert["status"])
		if status == "" {
			status = groupStatus
		}
		if status == "" {
			return nil, fail(preset, "alerts[%d] has no status (firing or resolved)", i)
		}
		labels := stringMap(alert["labels"])
		if labels == nil {
			labels = map[string]string{}
		}
		ev := Event{EventType: "alert." + status, Labels: labels, Headers: headers}
		if status == "resolved" {
			ev.Time = firstTime(alert["endsAt"], alert["startsAt"])
		} else {
			ev.Time = firstTime(alert["startsAt"])
		}
		ev.Text = oneLine(str(get(alert, "annotations", "summary")))
		if ev.Text == "" {
			ev.Text = oneLine(labels["alertname"])
		}
		fingerprint := str(alert["fingerprint"])
		if fingerprint == "" {
			// Alertmanager before 0.19 sent no fingerprint; an alert's identity is its label set.
			fingerprint = canonicalLabels(labels)
		}
		ev.DedupID = dedupID(preset, groupKey, status, fingerprint, str(alert["startsAt"]))
		ev.Payload, err = withGroup(raw, alert, group)
		if err != nil {
			return nil, fail(preset, "alerts[%d]: %v", i, err)
		}
		total += len(ev.Payload)
		if total > lim.maxBytes {
			return nil, fail(preset, "the notification's group fields (commonLabels, commonAnnotations, ...) are too large to repeat on each of its %d alerts", len(alerts))
		}
		events = append(events, ev)
	}
	return events, nil
}

func senderName(preset string) string {
	if preset == Grafana {
		return "Grafana Alerting's"
	}
	return "Alertmanager's"
}

// withGroup is the alert object as sent with a "group" member added at its end; an alert
// that has a "group" of its own (no sender writes one) gets it replaced.
func withGroup(raw []byte, alert map[string]any, group []byte) (json.RawMessage, error) {
	if _, clash := alert["group"]; clash {
		var members map[string]json.RawMessage
		if err := json.Unmarshal(raw, &members); err != nil {
			return nil, err
		}
		members["group"] = group
		return json.Marshal(members)
	}
	head := bytes.TrimSpace(raw[:len(raw)-1]) // without the closing brace
	out := make([]byte, 0, len(raw)+len(group)+10)
	out = append(out, head...)
	if len(alert) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"group":`...)
	out = append(out, group...)
	return append(out, '}'), nil
}

// canonicalLabels writes a label set in one order, as Alertmanager's own fingerprint is
// a hash of the sorted label pairs.
func canonicalLabels(labels map[string]string) string {
	var b strings.Builder
	for _, k := range sortedKeys(labels) {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	return b.String()
}
