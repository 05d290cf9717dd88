package service

import (
	"testing"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Whatever is on the audit stream, a record is accepted only under a project subject, for
// that project, with an id and a known action.
func FuzzParseAuditMsg(f *testing.F) {
	f.Add("svc-audit.pa", []byte(`{"id":"key.read:pa:k:events:2026112704","action":"key.read","actor":"k"}`))
	f.Add("svc-audit.pa", []byte(`{"id":"x","action":"deadletter.replay","details":{"deliveries":1}}`))
	f.Add("svc-audit.pa.pb", []byte(`{"id":"x","action":"key.read"}`))
	f.Add("svc-audit.", []byte(`{"id":"x","action":"key.read"}`))
	f.Add("svc-audit.pa", []byte(`{"id":"","action":"member.remove"}`))
	f.Add("svc-audit.pa", []byte(`{"id":"x","action":"incident.acknowledge","target":"inc_1"}`))
	f.Add("svc-audit.pa", []byte(`{"id":"x","action":"incident.Drop table"}`))
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		project, r, ok := parseAuditMsg(subject, data)
		if !ok {
			return
		}
		if streams.AuditSubject(project) != subject || !streams.ValidProjectID(project) {
			t.Fatalf("project %q from subject %q", project, subject)
		}
		if r.ID == "" || !streams.IsAuditAction(r.Action) {
			t.Fatalf("accepted %+v", r)
		}
	})
}
