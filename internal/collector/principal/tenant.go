// Package principal is the authenticated principal of a data-plane request: which project a
// request belongs to. The authenticator puts it into the collector's client.Info, which
// the collector carries from receiver to exporter, so every component reads the project
// from the request itself and never from the payload (tenant isolation).
package principal

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/client"
)

// Authentication outcomes that callers map to answers: 401 missing_api_key, 401
// invalid_api_key, 503 unavailable.
var (
	ErrMissingKey = errors.New("no API key: send it in the X-API-Key header")
	ErrInvalidKey = errors.New("the API key is not valid (unknown, revoked, or not allowed here)")
	ErrNotReady   = errors.New("key configuration not loaded yet; retry shortly")
)

// Attribute names in client.Info.Auth.
const (
	AttrProjectID = "project_id"
	AttrKeyID     = "key_id"
	AttrAccountID = "account_id"
	AttrScope     = "scope"
	AttrSourceID  = "source_id"
)

// Principal is who sent a request.
type Principal struct {
	ProjectID string
	KeyID     string
	AccountID string
	Scope     string
	SourceID  string
	// Email is a console token's user's email (ScopeConsole, tokens that carry it): who
	// acted, as people read it. KeyID stays "user:<id>", which roles are keyed by.
	Email string
	// ReadOnly is a console token minted with a read-only credential: it changes nothing.
	ReadOnly bool
}

// GetAttribute implements client.AuthData.
func (p Principal) GetAttribute(name string) any {
	switch name {
	case AttrProjectID:
		return p.ProjectID
	case AttrKeyID:
		return p.KeyID
	case AttrAccountID:
		return p.AccountID
	case AttrScope:
		return p.Scope
	case AttrSourceID:
		return p.SourceID
	}
	return nil
}

// GetAttributeNames implements client.AuthData.
func (p Principal) GetAttributeNames() []string {
	return []string{AttrProjectID, AttrKeyID, AttrAccountID, AttrScope, AttrSourceID}
}

// NewContext returns ctx with p as the client's auth data, keeping the rest of client.Info
// (peer address, metadata).
func NewContext(ctx context.Context, p Principal) context.Context {
	info := client.FromContext(ctx)
	info.Auth = p
	return client.NewContext(ctx, info)
}

// FromContext returns the principal of the request, if it was authenticated by us.
func FromContext(ctx context.Context) (Principal, bool) {
	auth := client.FromContext(ctx).Auth
	if auth == nil {
		return Principal{}, false
	}
	if p, ok := auth.(Principal); ok {
		return p, p.ProjectID != ""
	}
	// Another hop may have re-wrapped the data; read it attribute by attribute.
	id, _ := auth.GetAttribute(AttrProjectID).(string)
	if id == "" {
		return Principal{}, false
	}
	str := func(n string) string { s, _ := auth.GetAttribute(n).(string); return s }
	return Principal{ProjectID: id, KeyID: str(AttrKeyID), AccountID: str(AttrAccountID), Scope: str(AttrScope), SourceID: str(AttrSourceID)}, true
}
