package service

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// Scoped project keys. A key may send (ingest), post agent results (results) and read
// stored events and deliveries through the console API (read). The key built into every
// sending application needs the first two and should not read what everyone sent, so a
// new key gets those; read is chosen explicitly. A key made before scopes keeps all three
// (store.Key.Scopes nil, and its mirror entry lists none) until its owner narrows it.

// DefaultKeyScopes are a new key's scopes when the request names none.
var DefaultKeyScopes = []string{mirror.PermIngest, mirror.PermResults}

// ValidKeyScopes checks a key's scopes and returns them in their canonical order
// (ingest, results, read).
func ValidKeyScopes(scopes []string) ([]string, *apierror.Error) {
	if len(scopes) == 0 {
		return nil, BadBody(`scopes must name at least one of "ingest", "results", "read"`)
	}
	var out []string
	for _, s := range mirror.AllPerms {
		if slices.Contains(scopes, s) {
			out = append(out, s)
		}
	}
	for _, s := range scopes {
		if !slices.Contains(mirror.AllPerms, s) {
			return nil, BadBody(`scopes may only name "ingest", "results" and "read", not "` + trimForMessage(s) + `"`)
		}
	}
	if len(out) != len(scopes) {
		return nil, BadBody("scopes must not name a scope twice")
	}
	return out, nil
}

func trimForMessage(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// KeyScopes are what a key may do: its scopes, or all three for a key made before scopes.
func KeyScopes(k store.Key) []string {
	if k.Scopes == nil {
		return mirror.AllPerms
	}
	return k.Scopes
}

// SetKeyScopes changes what a project key may do (the dashboard's one-click narrowing);
// the receivers apply it within the mirror's latency, the key itself stays the same.
func (s *Service) SetKeyScopes(ctx context.Context, userID, id, keyID string, scopes []string) (k store.Key, err error) {
	scopes, e := ValidKeyScopes(scopes)
	if e != nil {
		return k, e
	}
	err = s.InProject(ctx, userID, id, Write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store) error {
		// What the key could do before, for the audit record (a project has few keys).
		keys, err := tx.Keys(ctx, p.ID)
		if err != nil {
			return err
		}
		var before map[string]any
		for _, old := range keys {
			if old.ID == keyID {
				before = map[string]any{"scopes": KeyScopes(old)}
			}
		}
		k, err = tx.SetKeyScopes(ctx, p.ID, keyID, scopes)
		if errors.Is(err, store.ErrNotFound) {
			return NotFound("key")
		}
		if err != nil {
			return err
		}
		store.AuditOf(ctx).Change(before, map[string]any{"scopes": scopes})
		if k.Scope != mirror.ScopeProject {
			// A push source's key only ever posts to its ingest URL.
			return BadBody("only project keys have scopes; a push source's key only posts to its source's ingest URL")
		}
		return ms.PutKey(ctx, k.Hash, mirrorKey(k, p.OwnerID))
	})
	return k, err
}
