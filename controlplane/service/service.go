// Package service holds the control plane's business rules once: who may do what to a
// project, what is valid, and how each change is stored and published to the
// configuration mirror. The REST handlers and the MCP tools (controlplane/api) decode
// their input, call it, and show the result in their own shape.
//
// Every change is applied in a database transaction, written to the mirror, and committed
// only when the mirror took it, so a successful call means the data plane sees the change.
// Errors are *apierror.Error (with the message users see), store.ErrNotFound or
// store.ErrConflict (which the caller names after what it operated on), or unexpected.
package service

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
)

// Service carries what the rules need.
type Service struct {
	Store  *store.Store
	Logger *slog.Logger
	// Mirror returns the configuration mirror and JetStream, or an error while NATS is
	// unreachable (changes are then refused with 503, reads still work).
	Mirror func(ctx context.Context) (*mirror.Store, jetstream.JetStream, error)
	// CheckPipeline compiles a pipeline as the data plane will run it
	// (validation.Check against a running collector, in production).
	CheckPipeline func(ctx context.Context, p mirror.Pipeline) (validation.Result, error)
	// CheckProjectPipeline, when set, is used instead for a pipeline of a project: its
	// answer carries warnings from the project's records (validation.CheckProject).
	CheckProjectPipeline func(ctx context.Context, projectID string, p mirror.Pipeline) (validation.Result, error)
	// ReceiverURL is the receiver's public address (no trailing slash): ingest URLs and
	// the console's data-plane read API are under it.
	ReceiverURL string
	// StreamLimits are those a new project's streams are created with.
	StreamLimits streams.Limits
	// SlackAPIURL is SVC_SLACK_API_URL, Slack's Web API ending in / ("": Slack's own),
	// which a slack_app destination's test message is posted to.
	SlackAPIURL string
	// OutboundAllow is SVC_OUTBOUND_ALLOW (internal/outbound).
	OutboundAllow []netip.Prefix
	// ConsoleKey signs console tokens; its public half is published in the mirror.
	ConsoleKey ed25519.PrivateKey
	// Usage returns the reader of the receivers' usage counts (internal/usage), or an
	// error while NATS is unreachable.
	Usage func(ctx context.Context) (*usage.Reader, error)
	// Now is the calendar clock of usage answers (time.Now when nil).
	Now func() time.Time
	// MaxProjects is how many projects an account may own unless the operator gave it
	// its own limit (SVC_MAX_PROJECTS_PER_ACCOUNT; 0: no limit).
	MaxProjects int64
	// PruneGrace spares mirror entries written this recently when a publish prunes what
	// the database does not know (resync.go); SVC_MIRROR_PRUNE_GRACE, 1m.
	PruneGrace time.Duration

	// revMu guards the background publish of pending revocations (console.go):
	// revDraining while it runs, revAgain when a failure was reported since its last read.
	revMu                 sync.Mutex
	revDraining, revAgain bool

	// afterSnapshot, when set (tests), runs between Resync's database read and its
	// publish: where a change the API makes races the re-publish.
	afterSnapshot func()
}

// Access is the level an operation needs on a project.
type Access int

const (
	Read  Access = iota // any member
	Write               // owner and admins
	Own                 // the owner alone (deleting the project)
)

// Op is what an operation does inside its transaction; ms is nil for reads.
type Op func(ctx context.Context, tx *store.Tx, p store.Project, role string, ms *mirror.Store) error

// InProject runs fn on a project in a transaction, after checking the user's access. A
// user who is not a member gets store.ErrNotFound whatever the project's existence, so a
// stranger never learns a project exists. Changes need the mirror: while NATS is away
// they are refused with 503 and nothing is saved.
func (s *Service) InProject(ctx context.Context, userID, projectID string, level Access, fn Op) error {
	if err := LimitsOf(ctx).allow(projectID, level); err != nil {
		return err
	}
	return s.Store.InTx(ctx, func(tx *store.Tx) error {
		p, role, err := tx.ProjectForUser(ctx, projectID, userID)
		if err != nil {
			return err
		}
		switch {
		case level == Write && role == store.RoleMember:
			return apierror.New(http.StatusForbidden, apierror.Forbidden, "only the project's owner and admins can change it")
		case level == Own && role != store.RoleOwner:
			return apierror.New(http.StatusForbidden, apierror.Forbidden, "only the project's owner can do this")
		}
		var ms *mirror.Store
		if level != Read {
			if ms, err = s.mirrorForChange(ctx); err != nil {
				return err
			}
		}
		return fn(ctx, tx, p, role, ms)
	})
}

func (s *Service) mirrorForChange(ctx context.Context) (*mirror.Store, error) {
	ms, _, err := s.Mirror(ctx)
	if err != nil {
		return nil, Unavailable("the configuration store (NATS) is unreachable; nothing was changed, retry shortly")
	}
	return ms, nil
}

// saveProject stores a changed project under a new version and publishes it.
func saveProject(ctx context.Context, tx *store.Tx, ms *mirror.Store, p *store.Project) error {
	p.Version++
	p.UpdatedAt = time.Now().UTC()
	if err := tx.UpdateProject(ctx, *p); err != nil {
		return err
	}
	return publish(ctx, tx, ms, *p)
}

// publish writes a project's data-plane configuration (pipeline, secret, sinks,
// members) to the mirror from the transaction's view.
func publish(ctx context.Context, tx *store.Tx, ms *mirror.Store, p store.Project) error {
	sinks, err := tx.Sinks(ctx, p.ID)
	if err != nil {
		return err
	}
	members, err := tx.MemberGrants(ctx, p.ID)
	if err != nil {
		return err
	}
	mp := mirrorProject(p, sinks, members)
	if mp.Backlog, err = backlogOf(ctx, tx, ms, p.ID, ""); err != nil {
		return err
	}
	return ms.PutProject(ctx, mp)
}

// mirrorProject is a project's mirror entry; members are its MemberGrants.
func mirrorProject(p store.Project, sinks []store.Sink, members map[string]store.Grant) mirror.Project {
	mp := mirror.Project{ID: p.ID, AccountID: p.OwnerID, Name: p.Name, Version: p.Version,
		Pipeline: p.Pipeline, SigningSecret: p.SigningSecret, UpdatedAt: p.UpdatedAt, AgentSince: p.AgentSince,
		AgentSinceSeq: p.AgentSinceSeq, Members: make(map[string]int64, len(members)), Roles: make(map[string]string, len(members))}
	for user, g := range members {
		mp.Members[user], mp.Roles[user] = g.Since, g.Role
	}
	for _, s := range sinks {
		mp.Sinks = append(mp.Sinks, s.Config)
	}
	// Without a rate of its own (PerSecond 0) the entry leaves it out: the receivers then
	// apply the deployment's default.
	if p.IngestRate.PerSecond > 0 {
		mp.IngestRate = &mirror.IngestRate{PerSecond: p.IngestRate.PerSecond, Burst: int(p.IngestRate.Burst)}
	}
	return mp
}

func mirrorKey(k store.Key, accountID string) mirror.KeyEntry {
	return mirror.KeyEntry{KeyID: k.ID, ProjectID: k.ProjectID, AccountID: accountID, Scope: k.Scope, SourceID: k.SourceID, Scopes: k.Scopes}
}

// assign sets *dst to *src when the request carried the field (src not nil): a partial
// update leaves out what it does not change.
func assign[T any](dst, src *T) {
	if src != nil {
		*dst = *src
	}
}

// NewID returns prefix + 16 random lowercase hex characters: safe in URLs, stream names
// and NATS subjects.
func NewID(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return prefix + hex.EncodeToString(b[:])
}

// BadBody is the contract's 400 invalid_body.
func BadBody(msg string) *apierror.Error {
	return apierror.New(http.StatusBadRequest, apierror.InvalidBody, msg)
}

// NotFound is the contract's 404 naming what.
func NotFound(what string) *apierror.Error {
	return apierror.New(http.StatusNotFound, apierror.NotFound, what+" not found")
}

// Unavailable is the contract's 503 with Retry-After.
func Unavailable(msg string) *apierror.Error {
	e := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable, msg)
	e.RetryAfter = 5 * time.Second
	return e
}
