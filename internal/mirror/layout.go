// Package mirror is the configuration mirror: what the control plane publishes into NATS
// KV buckets and the data plane reads from memory, so that no request waits on the control
// plane and the data plane keeps serving while the control plane is down.
//
// Layout (one JSON value per KV entry):
//
//	bucket svc-keys      key: hex SHA-256 of an API key   value: KeyEntry
//	bucket svc-projects  key: project id                  value: Project
//	bucket svc-sources   key: a push source's ingest key  value: Source
//	bucket svc-key-usage key: key id                      value: unix milliseconds of last use
//	bucket svc-settings  key: console-token-keys           value: ConsoleKeys
//	bucket svc-revocations key: a credential's id          value: Revocation
//
// The control plane is the only writer in production; it re-publishes its whole state on
// start, so a new or wiped NATS recovers. Tests write through the same Store.
//
// This package is the mirror's schema and its writer only: it must stay free of
// collector code, because the control plane imports it and links no collector package
// (a test in controlplane/ checks it). The data plane's in-memory copy, which finds its
// owner among the collector's extensions, is mirrorcache.
package mirror

import (
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
)

// Bucket names.
const (
	BucketKeys     = "svc-keys"
	BucketProjects = "svc-projects"
	BucketSources  = "svc-sources"
	// BucketKeyUsage is written by the data plane (when a key was last used, at most once
	// a minute per key and process) and read by the control plane for key listings.
	BucketKeyUsage = "svc-key-usage"
	// BucketSettings holds instance-wide settings, one entry per Key* name below.
	BucketSettings = "svc-settings"
	// BucketRevocations lists credentials (personal access tokens, dashboard sessions,
	// OAuth grants) revoked or logged out: console tokens minted with one are refused.
	// Entries expire after RevocationTTL, by when every such token has expired too.
	BucketRevocations = "svc-revocations"
)

// RevocationTTL is how long a revocation is kept: longer than any console token lives
// (consoletoken.MaxTTL, an hour, plus its clock leeway).
const RevocationTTL = 2 * time.Hour

// Revocation is an entry of BucketRevocations.
type Revocation struct {
	RevokedAt time.Time `json:"revoked_at"`
}

// Entries of BucketSettings.
const (
	// KeyConsoleTokenKeys holds the public keys that verify console tokens.
	KeyConsoleTokenKeys = "console-token-keys"
)

// Key scopes.
const (
	// ScopeProject keys send OTLP, events and agent results for their project.
	ScopeProject = "project"
	// ScopeIngest keys only post to the ingest URL of their push source.
	ScopeIngest = "ingest"
)

// KeyEntry is what a key hash resolves to.
type KeyEntry struct {
	KeyID     string `json:"key_id"`
	ProjectID string `json:"project_id"`
	AccountID string `json:"account_id,omitempty"`
	Scope     string `json:"scope"`
	// SourceID is set for ingest-scoped keys: the one source the key may post to.
	SourceID string `json:"source_id,omitempty"`
	// Scopes are what a project key may do: PermIngest, PermResults, PermRead. An entry
	// without them (a key made before keys had scopes) may do all three.
	Scopes []string `json:"scopes,omitempty"`
}

// What a project key may do (KeyEntry.Scopes).
const (
	// PermIngest sends OTLP and events (the same word as ScopeIngest, the kind of a push
	// source's key, which only ingests).
	PermIngest = "ingest"
	// PermResults posts agent results.
	PermResults = "results"
	// PermRead reads stored events and deliveries through the console API.
	PermRead = "read"
)

// AllPerms are a project key's scopes when its entry lists none.
var AllPerms = []string{PermIngest, PermResults, PermRead}

// Allows reports whether a project key may do perm; a key of another kind may not.
func (e KeyEntry) Allows(perm string) bool {
	if e.Scope != ScopeProject {
		return false
	}
	if len(e.Scopes) == 0 {
		return true
	}
	for _, s := range e.Scopes {
		if s == perm {
			return true
		}
	}
	return false
}

// Project is a project's data-plane configuration.
type Project struct {
	ID        string `json:"id"`
	AccountID string `json:"account_id,omitempty"`
	Name      string `json:"name,omitempty"`
	// Version increases with every change; data-plane components compile expressions
	// once per version.
	Version       int64    `json:"version"`
	Pipeline      Pipeline `json:"pipeline"`
	SigningSecret string   `json:"signing_secret,omitempty"`
	Sinks         []Sink   `json:"sinks,omitempty"`
	// IngestRate is the project's own ingest rate limit; nil (omitted) means the
	// deployment's default (the jetstream exporter's usage.rate_limit). A rate with
	// per_second 0 exempts the project from the default.
	IngestRate *IngestRate `json:"ingest_rate,omitempty"`
	// Members maps each member's user id (the owner's included) to the membership's
	// grant: when it began, in unix milliseconds. A console token names its user and
	// grant, and is honoured only while they match here, so removing a member (or
	// deleting the project) ends their tokens as fast as a revoked key. An entry without
	// members (written by an older control plane) honours no console token.
	Members map[string]int64 `json:"members,omitempty"`
	// Roles maps each member's user id to the role (owner, admin, member, viewer): what
	// a console token may do beyond reading (a replay needs owner or admin). A user not in
	// it has no role beyond reading.
	Roles     map[string]string `json:"roles,omitempty"`
	UpdatedAt time.Time         `json:"updated_at"`
	// WrittenAt is when this version was stored, by the writer's clock (Store.PutProject
	// sets it). Beside the time NATS stored the entry it tells how far the writer's clock
	// is from the NATS server's, which Sink.Since needs (ServerTime).
	WrittenAt time.Time `json:"written_at,omitempty"`
	// AgentSince is when the project's agent URL last went from empty to set, by the
	// writer's clock (as Sink.Since; ServerTime converts it): a new pipeline consumer
	// starts there, never with a backlog of what was stored before. Zero (an entry
	// written before it existed): the consumer starts from new records.
	AgentSince time.Time `json:"agent_since,omitempty"`
	// AgentSinceSeq is the last sequence of the project's raw stream when AgentSince was
	// recorded: a new pipeline consumer starts right after it, exactly, while the stream
	// still holds that history (after a wipe of NATS the stream starts again at 1 and the
	// number means nothing: AgentSince's time rule applies). Zero: not recorded.
	AgentSinceSeq uint64 `json:"agent_since_seq,omitempty"`
	// Backlog is the stored records the project's user chose to have processed:
	// the pipeline role runs it once, through the project's pipeline, and reports
	// on it in the svc-backlogs bucket (internal/validation). Only the newest runs.
	Backlog *Backlog `json:"backlog,omitempty"`
	// clockOffset is the writer's clock minus the NATS server's, less the write's latency,
	// when the entry was stored; SetStoredAt sets it, for entries that have WrittenAt.
	clockOffset time.Duration
}

// SetStoredAt records when NATS stored this entry (the KV entry's creation time, on the
// server's clock), which with WrittenAt gives ServerTime the writer's clock offset. The
// data plane's cache (mirrorcache) calls it for each entry it reads.
func (p *Project) SetStoredAt(stored time.Time) {
	if !p.WrittenAt.IsZero() {
		p.clockOffset = p.WrittenAt.Sub(stored)
	}
}

// ServerTime turns a time of the writer's clock, such as Sink.Since, into the NATS
// server's clock, which stamps stream messages. known is false for entries written
// without WrittenAt (by an older control plane): t is returned as it is then.
func (p Project) ServerTime(t time.Time) (server time.Time, known bool) {
	if p.WrittenAt.IsZero() {
		return t, false
	}
	return t.Add(-p.clockOffset), true
}

// Defaults of docs/contract.md#section-6: the control plane fills them in when a pipeline is
// saved, and the data plane applies them to an entry that lacks them.
const (
	DefaultBatchSize             = 10
	DefaultWindowDurationSeconds = 300
	// The window budget of window_max_bytes and window_max_events 0: 400,000 bytes of
	// JSON is about 100k tokens at ~4 bytes a token, which leaves a 128k-token model room
	// for its prompt and answer; 5,000 events keeps a window of tiny records readable.
	DefaultWindowMaxBytes  = 400_000
	DefaultWindowMaxEvents = 5_000
)

// Pipeline is docs/contract.md#section-6.
type Pipeline struct {
	Trigger               string   `json:"trigger"`
	Transforms            []string `json:"transforms"`
	AgentEndpointURL      string   `json:"agent_endpoint_url"`
	WindowEnabled         bool     `json:"window_enabled"`
	ContextFilter         string   `json:"context_filter"`
	WindowDurationSeconds int      `json:"window_duration_seconds"`
	GroupKey              string   `json:"group_key"`
	BatchSize             int      `json:"batch_size"`

	// Guardrails. Zero is "off" (or the default budget), and omitempty keeps
	// the mirror entries of projects that set none byte for byte what they were.
	CooldownSeconds   int    `json:"cooldown_seconds,omitempty"`
	DedupKey          string `json:"dedup_key,omitempty"`
	MaxCallsPerMinute int    `json:"max_calls_per_minute,omitempty"`
	MaxCallsPerDay    int    `json:"max_calls_per_day,omitempty"`
	WindowMaxBytes    int    `json:"window_max_bytes,omitempty"`
	WindowMaxEvents   int    `json:"window_max_events,omitempty"`

	// Incident mode (Mode "incident"; "" is legacy or window by WindowEnabled). The
	// durations are Go duration strings ("30s", "5m"); "" is the default.
	Mode          string `json:"mode,omitempty"`
	Fingerprint   string `json:"fingerprint,omitempty"`
	ResolveWhen   string `json:"resolve_when,omitempty"`
	GroupWait     string `json:"group_wait,omitempty"`
	GroupInterval string `json:"group_interval,omitempty"`
	ResolveAfter  string `json:"resolve_after,omitempty"`
	ReopenWithin  string `json:"reopen_within,omitempty"`
}

// Pipeline modes (docs/contract.md#section-6). ModeLegacy and ModeWindow are also what
// WindowEnabled says when Mode is empty.
const (
	ModeLegacy   = "legacy"
	ModeWindow   = "window"
	ModeIncident = "incident"
)

// Defaults of incident mode.
const (
	DefaultGroupWait     = 30 * time.Second
	DefaultGroupInterval = 5 * time.Minute
	DefaultResolveAfter  = 30 * time.Minute
	DefaultReopenWithin  = time.Duration(0) // off: an event after resolution opens a new incident
)

// EffectiveMode is the pipeline's mode: Mode when set, else legacy or window by
// WindowEnabled.
func (p Pipeline) EffectiveMode() string {
	switch {
	case p.Mode != "":
		return p.Mode
	case p.WindowEnabled:
		return ModeWindow
	}
	return ModeLegacy
}

// Sink is a destination of agent results (docs/contract.md#section-8).
type Sink struct {
	ID           string            `json:"id"`
	Kind         string            `json:"kind"` // webhook | chat | slack_app
	Enabled      bool              `json:"enabled"`
	URL          string            `json:"url"`
	Method       string            `json:"method,omitempty"`
	Headers      map[string]string `json:"headers,omitempty"`
	Format       string            `json:"format,omitempty"`
	TextTemplate string            `json:"text_template,omitempty"`
	// Kind "slack_app": a Slack app posting with its bot token to Channel, one thread per
	// incident, whose buttons Slack posts back to the receiver signed with SigningSecret.
	BotToken      string `json:"bot_token,omitempty"`
	SigningSecret string `json:"signing_secret,omitempty"`
	Channel       string `json:"channel,omitempty"`
	// Since is when the sink was created or last enabled: it receives the results stored
	// from then on, never a backlog from before it existed or while it was off.
	Since time.Time `json:"since,omitempty"`
}

// Backlog is a run of a project's pipeline over records already stored on its raw
// stream, sequences FirstSeq to LastSeq, which its user asked for after a preview that
// announced Records records and Calls agent calls.
type Backlog struct {
	ID          string    `json:"id"` // "bl_" and a random token
	FirstSeq    uint64    `json:"first_seq"`
	LastSeq     uint64    `json:"last_seq"`
	Records     int       `json:"records"`
	Calls       int       `json:"calls"`
	RequestedAt time.Time `json:"requested_at"`
	RequestedBy string    `json:"requested_by"`
}

// IngestRate is a per-project ingest rate limit: records per second, with a burst (the
// most records one request, or a quick run of them, may hold; 0 means per_second rounded
// up). Each receiver process applies it on its own, so N receivers allow N times it.
type IngestRate struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst,omitempty"`
}

// Source is a push source (docs/contract.md#section-4 and #section-5).
type Source struct {
	ID             string               `json:"id"`
	ProjectID      string               `json:"project_id"`
	Name           string               `json:"name"`
	Connector      string               `json:"connector"`
	EventType      string               `json:"event_type"`
	EventTypeField string               `json:"event_type_field,omitempty"`
	TextTemplate   string               `json:"text_template,omitempty"`
	EventTimeField string               `json:"event_time_field,omitempty"`
	Labels         map[string]string    `json:"labels,omitempty"`
	Preset         string               `json:"preset,omitempty"`
	Verification   *sourceverify.Config `json:"verification,omitempty"` // always the Stored() form
}

// ConsoleKeys are the Ed25519 public keys (base64, standard encoding, 32 bytes each) that
// verify console tokens (internal/consoletoken), which the control plane signs. A list,
// so that during a rotation tokens signed with the previous key stay valid until they
// expire; the control plane drops the old key afterwards.
type ConsoleKeys struct {
	PublicKeys []string `json:"public_keys"`
}
