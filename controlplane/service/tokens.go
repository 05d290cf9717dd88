package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
)

// Personal access tokens: a user's long-lived credential for scripts and MCP clients,
// accepted wherever a login token is. They are 256 random bits stored as their SHA-256
// (as API keys are), shown once, and checked against the database on every request, so a
// revoked or expired token stops at once.
const (
	DefaultTokenDays = 30
	MaxTokenDays     = 365
	// lastUsedEvery bounds the writes a busy token causes: its last use is recorded at
	// most once a minute.
	lastUsedEvery = time.Minute
)

// ErrTokenInvalid is an unknown, revoked or expired access token.
var ErrTokenInvalid = errors.New("the access token is unknown, revoked or expired")

// MaxTokenProjects bounds the projects one token may be limited to.
const MaxTokenProjects = 100

// CreateAccessToken makes a token for the user; days 0 means DefaultTokenDays.
func (s *Service) CreateAccessToken(ctx context.Context, userID, name string, days int) (store.AccessToken, string, error) {
	return s.CreateLimitedAccessToken(ctx, userID, name, days, Limits{})
}

// CreateLimitedAccessToken makes a token for the user that opens only lim.Projects (nil:
// all of the user's, now and later) and, when lim.ReadOnly, only reads.
func (s *Service) CreateLimitedAccessToken(ctx context.Context, userID, name string, days int, lim Limits) (store.AccessToken, string, error) {
	if lim.Projects != nil {
		if len(lim.Projects) == 0 || len(lim.Projects) > MaxTokenProjects {
			return store.AccessToken{}, "", BadBody(fmt.Sprintf("projects must list 1 to %d project ids, or be left out for all of yours", MaxTokenProjects))
		}
		seen := map[string]bool{}
		for _, id := range lim.Projects {
			if seen[id] || id == "" || strings.Contains(id, ",") {
				return store.AccessToken{}, "", BadBody("projects must list distinct project ids")
			}
			seen[id] = true
		}
	}
	name, e := ValidName(name)
	if e != nil {
		return store.AccessToken{}, "", e
	}
	if days == 0 {
		days = DefaultTokenDays
	}
	if days < 1 || days > MaxTokenDays {
		return store.AccessToken{}, "", BadBody("expires_in_days must be 1 to 365 (default 30)")
	}
	secret := apikey.Generate(apikey.KindAccess)
	now := time.Now().UTC()
	a := store.AccessToken{ID: NewID("pat_"), UserID: userID, Name: name, Prefix: apikey.Prefix(secret),
		Hash: apikey.Hash(secret), CreatedAt: now, ExpiresAt: now.Add(time.Duration(days) * 24 * time.Hour),
		ProjectIDs: lim.Projects, ReadOnly: lim.ReadOnly}
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		if err := credentialHeld(ctx, tx, userID); err != nil {
			return err
		}
		for _, id := range lim.Projects {
			// Only the user's own projects: a stranger's id is not found, as anywhere.
			if _, _, err := tx.ProjectForUser(ctx, id, userID); errors.Is(err, store.ErrNotFound) {
				return NotFound("project " + id)
			} else if err != nil {
				return err
			}
		}
		store.AuditOf(ctx).SetTarget(a.ID)
		store.AuditOf(ctx).Change(nil, map[string]any{"name": a.Name, "projects": a.ProjectIDs, "read_only": a.ReadOnly, "expires_at": a.ExpiresAt})
		return tx.CreateAccessToken(ctx, a)
	})
	return a, secret, err
}

// AccessTokens lists the user's tokens (without their secrets).
func (s *Service) AccessTokens(ctx context.Context, userID string) ([]store.AccessToken, error) {
	if LimitsOf(ctx).Projects != nil { // the tokens name the projects they open
		return nil, AccountRefusal
	}
	var out []store.AccessToken
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		out, err = tx.AccessTokens(ctx, userID)
		return err
	})
	return out, err
}

// RevokeAccessToken deletes one of the user's tokens; another user's token is "not found".
func (s *Service) RevokeAccessToken(ctx context.Context, userID, id string) error {
	if LimitsOf(ctx).Limited() {
		return AccountRefusal
	}
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.DeleteAccessToken(ctx, userID, id); err != nil {
			return err
		}
		return RecordRevocations(ctx, tx, id)
	})
	if errors.Is(err, store.ErrNotFound) {
		return NotFound("token")
	}
	if err == nil {
		s.RevokeCredentials(ctx, id)
	}
	return err
}

// IsAccessToken tells an access token from a login token by its kind prefix.
func IsAccessToken(tok string) bool { return strings.HasPrefix(tok, apikey.KindAccess) }

// UserByAccessToken resolves a token to its user and itself as a Credential, or
// ErrTokenInvalid.
func (s *Service) UserByAccessToken(ctx context.Context, tok string) (store.User, Credential, error) {
	var u store.User
	var cred Credential
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		a, err := tx.AccessTokenByHash(ctx, apikey.Hash(tok))
		if errors.Is(err, store.ErrNotFound) {
			return ErrTokenInvalid
		}
		if err != nil {
			return err
		}
		now := time.Now()
		if !now.Before(a.ExpiresAt) {
			return ErrTokenInvalid
		}
		cred = Credential{ID: a.ID, ExpiresAt: a.ExpiresAt, Limits: Limits{Projects: a.ProjectIDs, ReadOnly: a.ReadOnly}}
		if now.Sub(a.LastUsedAt) >= lastUsedEvery {
			if err := tx.TouchAccessToken(ctx, a.ID, now); err != nil {
				return err
			}
		}
		u, err = tx.UserByID(ctx, a.UserID)
		if errors.Is(err, store.ErrNotFound) {
			return ErrTokenInvalid
		}
		return err
	})
	return u, cred, err
}

// NoTokenFromToken refuses managing tokens with an access token: a leaked token must not
// be able to mint successors that outlive its revocation.
var NoTokenFromToken = apierror.New(http.StatusForbidden, apierror.Forbidden,
	"access tokens cannot create access tokens: sign in (POST /api/v1/auth/login) and use that token")
