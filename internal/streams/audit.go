package streams

import (
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// AuditStream holds the audit records the receivers publish for reads and replays they
// serve (the control plane never sees those requests): one stream for all projects,
// consumed by the control planes with one durable consumer and written to their audit
// store. Losing its oldest records when full is better than refusing them: a publisher
// must never fail or slow the read it records, and the store is the log of record.
const AuditStream = "svc-audit"

// AuditSubject is the subject of a project's audit records.
func AuditSubject(projectID string) string { return AuditStream + "." + projectID }

// AuditProject returns the project an audit subject names ("" when it names none).
func AuditProject(subject string) string {
	p, ok := strings.CutPrefix(subject, AuditStream+".")
	if !ok || !ValidProjectID(p) {
		return ""
	}
	return p
}

// AuditMaxBytes bounds the audit stream. Unlike the per-project streams (see Limits) it
// is one stream, so reserving its size costs the server's store once.
const AuditMaxBytes = 256 << 20

// AuditDuplicateWindow lets a publisher name a record for an hour (a key's reads on one
// surface in one hour) and publish it on every read: the stream keeps the first.
const AuditDuplicateWindow = time.Hour + 5*time.Minute

// AuditConfig is the configuration of the audit stream.
func AuditConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:       AuditStream,
		Subjects:   []string{AuditStream + ".*"},
		Storage:    jetstream.FileStorage,
		Retention:  jetstream.LimitsPolicy,
		Discard:    jetstream.DiscardOld,
		MaxAge:     7 * 24 * time.Hour,
		MaxBytes:   AuditMaxBytes,
		MaxMsgSize: 16 << 10,
		Replicas:   max(replicas, 1),
		Duplicates: AuditDuplicateWindow,
	}
}
