package service

import (
	"context"
	"net/http"
	"slices"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

// Limits narrow what a credential may do within its user's rights: a personal access
// token may be limited to some projects and to reading. The API and the MCP tools put the
// credential's limits in the context (WithLimits); InProject and the listings apply them,
// so every operation on a project is checked in one place.
type Limits struct {
	// Projects are the only projects the credential opens; nil: all of its user's.
	Projects []string
	// ReadOnly credentials change nothing.
	ReadOnly bool
}

// ReadOnlyRefusal answers a change asked for with a read-only credential.
var ReadOnlyRefusal = apierror.New(http.StatusForbidden, apierror.InsufficientScope,
	"this personal access token is read-only: a change needs the write scope; use a token without the read-only limit, or the dashboard")

// LimitedTokenRefusal answers creating a project with a token limited to some projects
// or to reading: the new project would be outside its limits.
var LimitedTokenRefusal = apierror.New(http.StatusForbidden, apierror.InsufficientScope,
	"this personal access token is limited to some projects or to reading: creating a project needs the write scope on all projects; use an unlimited token, or the dashboard")

// AccountRefusal answers an account-wide operation asked for with a limited token: the
// account's password, sessions, tokens, grants and audit log are outside any project, so a
// token limited to some projects or to reading neither changes them nor reads the ones
// naming other projects.
var AccountRefusal = apierror.New(http.StatusForbidden, apierror.InsufficientScope,
	"this personal access token is limited to some projects or to reading: the account's password, sessions, tokens and audit log need an unlimited token, or the dashboard")

// Limited reports whether the credential is narrower than its user.
func (l Limits) Limited() bool { return l.Projects != nil || l.ReadOnly }

type limitsKey struct{}

type credentialKey struct{}

// WithCredential returns ctx carrying the credential a request came with, which what it
// creates re-checks (credentialHeld) and the console tokens it mints name.
func WithCredential(ctx context.Context, c Credential) context.Context {
	return context.WithValue(ctx, credentialKey{}, c)
}

// CredentialOf returns the credential ctx carries (the zero one when none).
func CredentialOf(ctx context.Context) Credential {
	c, _ := ctx.Value(credentialKey{}).(Credential)
	return c
}

// WithLimits returns ctx carrying the limits of the credential a request came with.
func WithLimits(ctx context.Context, l Limits) context.Context {
	if l.Projects == nil && !l.ReadOnly {
		return ctx
	}
	return context.WithValue(ctx, limitsKey{}, l)
}

// LimitsOf returns the limits ctx carries (none when it carries none).
func LimitsOf(ctx context.Context) Limits {
	l, _ := ctx.Value(limitsKey{}).(Limits)
	return l
}

// Opens reports whether the credential may act on projectID at all.
func (l Limits) Opens(projectID string) bool {
	return l.Projects == nil || slices.Contains(l.Projects, projectID)
}

// allow checks an operation on a project: a project outside the limits is not found,
// as for a stranger, so a limited token learns nothing of the others.
func (l Limits) allow(projectID string, level Access) error {
	if !l.Opens(projectID) {
		return store.ErrNotFound
	}
	if l.ReadOnly && level != Read {
		return ReadOnlyRefusal
	}
	return nil
}

// filter keeps the projects (and their roles) the credential opens.
func (l Limits) filter(ps []store.Project, roles []string) ([]store.Project, []string) {
	if l.Projects == nil {
		return ps, roles
	}
	var keptP []store.Project
	var keptR []string
	for i, p := range ps {
		if l.Opens(p.ID) {
			keptP, keptR = append(keptP, p), append(keptR, roles[i])
		}
	}
	return keptP, keptR
}
