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

// Actions of the records receivers publish on the audit stream.
const (
	// AuditKeyRead is a credential's reads on one console surface within one hour.
	AuditKeyRead = "key.read"
	// AuditReplay is a replay of dead-lettered deliveries queued at a receiver.
	AuditReplay = "deadletter.replay"
	// AuditIncidentPrefix starts the action of a person's incident action at a receiver:
	// "incident.acknowledge", "incident.resolve", ...
	AuditIncidentPrefix = "incident."
)

// IsAuditAction reports whether action is one receivers publish: a key's reads, a
// replay, or an incident action (a lower-case word after AuditIncidentPrefix).
func IsAuditAction(action string) bool {
	if action == AuditKeyRead || action == AuditReplay {
		return true
	}
	verb, ok := strings.CutPrefix(action, AuditIncidentPrefix)
	if !ok || verb == "" || len(verb) > 32 {
		return false
	}
	for i := 0; i < len(verb); i++ {
		if c := verb[i]; (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

// AuditRecord is one record on the audit stream. Its project is the subject's, never a
// field: a record cannot name another project than the one it is filed under.
type AuditRecord struct {
	// ID names the record across publishers and redeliveries: its Nats-Msg-Id, and what
	// the control plane deduplicates by.
	ID     string    `json:"id"`
	Action string    `json:"action"`
	At     time.Time `json:"at"`
	// Actor is the credential's key id: an API key's id, or "user:<id>" for a console token.
	Actor      string `json:"actor"`
	ActorEmail string `json:"actor_email,omitempty"`
	// Scope is the credential's scope (a key scope, or "console").
	Scope string `json:"scope,omitempty"`
	// Surface is the console endpoint read (key.read).
	Surface string `json:"surface,omitempty"`
	Target  string `json:"target,omitempty"`
	// Addr is the client's address as the receiver saw it.
	Addr    string         `json:"addr,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

// AuditReadID is the id of a credential's reads of a surface in the hour of at: every
// read in that hour publishes the same id, and the stream keeps one.
func AuditReadID(projectID, actor, surface string, at time.Time) string {
	return AuditKeyRead + ":" + projectID + ":" + actor + ":" + surface + ":" + at.UTC().Format("2006010215")
}
