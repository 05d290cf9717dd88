package sourcepreset

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
)

// parseHeaders reads "Name: value" lines, the fuzzer's form of a request's headers.
func parseHeaders(s string) http.Header {
	h := http.Header{}
	for _, line := range strings.Split(s, "\n") {
		name, value, ok := strings.Cut(line, ":")
		if ok && name != "" {
			h.Add(strings.TrimSpace(name), strings.TrimSpace(value))
		}
	}
	return h
}

// signatureHeaders are what no preset may keep.
var signatureHeaders = []string{"authorization", "x-hub-signature", "x-hub-signature-256", "stripe-signature",
	"sentry-hook-signature", "x-pagerduty-signature", "webhook-signature", "x-service-token", "cookie"}

// FuzzSplit feeds every preset's splitter arbitrary headers and bodies: it must never
// panic, and what it returns must be storable (testdata/fuzz/FuzzSplit holds a seed per
// preset, built from the samples in testdata).
//
//	go test ./internal/sourcepreset -run '^$' -fuzz FuzzSplit -fuzztime 20s
//
// FUZZ_PRESET=github (or any other preset) spends the run on that preset alone.
func FuzzSplit(f *testing.F) {
	f.Add(Alertmanager, "User-Agent: Alertmanager/0.27.0", fixture(f, "alertmanager.json"))
	f.Add(Grafana, "", fixture(f, "grafana.json"))
	f.Add(GitHub, "X-GitHub-Event: pull_request\nX-GitHub-Delivery: 72d3162e\nX-Hub-Signature-256: sha256=00", fixture(f, "github_pull_request.json"))
	f.Add(Stripe, "Stripe-Signature: t=1,v1=0", fixture(f, "stripe_event.json"))
	f.Add(Sentry, "Sentry-Hook-Resource: issue\nRequest-ID: r1\nSentry-Hook-Timestamp: 1566248318", fixture(f, "sentry_issue.json"))
	f.Add(PagerDuty, "X-Webhook-Id: w1", fixture(f, "pagerduty_incident.json"))
	f.Add(CloudEvents, "Ce-Specversion: 1.0\nCe-Type: t\nCe-Id: 1\nCe-Source: /s", []byte(`{"a":1}`))
	const maxEvents = 50
	only := os.Getenv("FUZZ_PRESET")
	if only != "" && !Valid(only) {
		f.Fatalf("FUZZ_PRESET=%q is not a preset", only)
	}
	f.Fuzz(func(t *testing.T, preset, headers string, body []byte) {
		if only != "" {
			preset = only
		} else if !Valid(preset) {
			// Spend the fuzzer's time on the presets, not on unknown names.
			names := Names()
			preset = names[len(preset)%len(names)]
		}
		evs, err := Split(preset, parseHeaders(headers), body, Limits{MaxEvents: maxEvents})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Preset != preset || e.Message == "" {
				t.Fatalf("%s: the error is not a message for the sender: %#v", preset, err)
			}
			return
		}
		if len(evs) > maxEvents {
			t.Fatalf("%s: %d events, more than the limit", preset, len(evs))
		}
		total := 0
		for _, ev := range evs {
			p := bytes.TrimSpace(ev.Payload)
			if len(p) == 0 || p[0] != '{' || !json.Valid(p) {
				t.Fatalf("%s: payload is not one JSON object: %q", preset, ev.Payload)
			}
			total += len(ev.Payload)
			if ev.EventType == "" {
				t.Fatalf("%s: empty event type", preset)
			}
			if ev.Labels == nil {
				t.Fatalf("%s: nil labels", preset)
			}
			if len(ev.DedupID) > len("sha256:")+64 {
				t.Fatalf("%s: dedup id too long: %q", preset, ev.DedupID)
			}
			for i := 0; i < len(ev.DedupID); i++ {
				if c := ev.DedupID[i]; c <= ' ' || c >= 0x7f {
					t.Fatalf("%s: dedup id %q holds %q, which a NATS message id cannot", preset, ev.DedupID, c)
				}
			}
			for name := range ev.Headers {
				for _, s := range signatureHeaders {
					if name == s {
						t.Fatalf("%s: kept the credential header %s", preset, name)
					}
				}
			}
		}
		if total > 4*len(body)+64<<10 {
			t.Fatalf("%s: %d bytes of payloads from a %d-byte body", preset, total, len(body))
		}
	})
}
