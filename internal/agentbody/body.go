// Package agentbody builds the bodies of calls to the agent (docs/contract.md#section-7) from
// records as they sit on the raw stream: legacy arrays (Array), window calls
// (WindowCall) and incident calls (IncidentCall). The pipeline (window and incident
// processors, agent exporter) and the console's dry run share it, so what Try it shows is byte for byte what the
// agent would receive.
//
// Records are inserted as they are, never decoded and re-encoded: a record no transform
// touched reaches the agent byte for byte.
package agentbody

import "strconv"

// Array is a legacy-mode body: "[" + bodies joined by "," + "]".
func Array(bodies [][]byte) []byte {
	n := 2 + len(bodies)
	for _, b := range bodies {
		n += len(b)
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, b := range bodies {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	return append(out, ']')
}

// WindowCall is a window-mode body, {"trigger": <record>, "window": [<records>]}, with
// "window_truncated" (records left out to fit the budget) and "suppressed" (triggers a
// cooldown held back before this one) when not zero, so the bodies of projects without
// guardrails are what they always were.
func WindowCall(trigger []byte, window [][]byte, truncated int, suppressed int64) []byte {
	n := len(trigger) + 80
	for _, w := range window {
		n += len(w) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"trigger":`...)
	b = append(b, trigger...)
	b = append(b, `,"window":[`...)
	for i, w := range window {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, w...)
	}
	b = append(b, ']')
	if truncated > 0 {
		b = append(b, `,"window_truncated":`...)
		b = strconv.AppendInt(b, int64(truncated), 10)
	}
	if suppressed > 0 {
		b = append(b, `,"suppressed":`...)
		b = strconv.AppendInt(b, suppressed, 10)
	}
	return append(b, '}')
}
