package incident

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotFound: no incident of that id in the project.
var ErrNotFound = errors.New("incident not found")

// ErrResolved: the action (acknowledge, mute) makes no sense on a resolved incident.
var ErrResolved = errors.New("incident is resolved")

var errNotYet = errors.New("incident: not implemented yet")

// Store keeps incidents in the Bucket.
type Store struct {
	kv jetstream.KeyValue
	// maxOpen bounds a project's open incidents (tests lower it).
	maxOpen int
}

// Open binds to the bucket, creating it when missing (history 1, 30 days max age).
func Open(ctx context.Context, js jetstream.JetStream, replicas int) (*Store, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: Bucket, Description: "otelcol-svc incidents: each fingerprint's current one, archived ones, calls",
			History: 1, TTL: bucketMaxAge, MaxValueSize: maxValue, Storage: jetstream.FileStorage,
			Replicas: max(replicas, 1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("incident bucket %s: %w", Bucket, err)
	}
	return &Store{kv: kv, maxOpen: defaultMaxOpen}, nil
}

// KV is the bucket.
func (s *Store) KV() jetstream.KeyValue { return s.kv }

func fKey(project, fph string) string { return project + ".f." + fph }
func rKey(project, id string) string  { return project + ".r." + id }
func cKey(project, req string) string { return project + ".c." + req }
func nKey(project string) string      { return project + ".n" }

// Join is one fingerprint's events of one batch.
type Join struct {
	Fingerprint string
	BatchKey    string
	Events      int64
	Title       string
	Resolve     bool
	At          time.Time
}

// JoinResult is what Apply did.
type JoinResult struct {
	Incident                           Incident
	Opened, Reopened, Resolved, Joined bool
	Notices                            []Notice
}

// Apply counts a batch's events of one fingerprint into its incident.
func (s *Store) Apply(ctx context.Context, project string, set Settings, j Join) (JoinResult, error) {
	return JoinResult{}, errNotYet
}

// ResolveIdle resolves the incident when no event came for ResolveAfter.
func (s *Store) ResolveIdle(ctx context.Context, project, fph string, set Settings, now time.Time) (Incident, []Notice, error) {
	return Incident{}, nil, errNotYet
}

// Claim takes the call that is due.
func (s *Store) Claim(ctx context.Context, project, fph string, reason, requestID, owner string, now time.Time, set Settings, claimTimeout time.Duration) (Incident, bool, error) {
	return Incident{}, false, errNotYet
}

// Heartbeat keeps a claim fresh.
func (s *Store) Heartbeat(ctx context.Context, project, fph, requestID string, now time.Time) error {
	return errNotYet
}

// Complete ends a claimed call.
func (s *Store) Complete(ctx context.Context, project, fph, requestID, outcome string, now time.Time) (Incident, []Notice, error) {
	return Incident{}, nil, errNotYet
}

// Act applies a person's action.
func (s *Store) Act(ctx context.Context, project, id, action, by string, now time.Time) (Incident, []Notice, error) {
	return Incident{}, nil, errNotYet
}

// AttachResult attaches an agent result to the incident of its call.
func (s *Store) AttachResult(ctx context.Context, project, requestID, text string, now time.Time) (Incident, bool, error) {
	return Incident{}, false, errNotYet
}

// SetChatThread records a destination's root message.
func (s *Store) SetChatThread(ctx context.Context, project, id, sinkID string, t ChatThread) error {
	return errNotYet
}

// AddTimeline appends an entry.
func (s *Store) AddTimeline(ctx context.Context, project, id string, e Entry) error {
	return errNotYet
}

// Get reads an incident.
func (s *Store) Get(ctx context.Context, project, id string) (Incident, error) {
	return Incident{}, errNotYet
}

// ByRequest finds the incident of a call's request id.
func (s *Store) ByRequest(ctx context.Context, project, requestID string) (Incident, string, bool, error) {
	return Incident{}, "", false, errNotYet
}

// List lists a project's incidents.
func (s *Store) List(ctx context.Context, project, status string, limit int) ([]Incident, error) {
	return nil, errNotYet
}

// Watch watches the current incident of every fingerprint of every project.
func (s *Store) Watch(ctx context.Context) (jetstream.KeyWatcher, error) {
	return s.kv.Watch(ctx, "*.f.*")
}

var _ = json.Marshal
