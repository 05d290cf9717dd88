package ingestreceiver

import (
	"context"
	"net/http"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

// resultsAuth is the projectauth extension's authentication of agent results, whose key
// needs the results scope; extensionauth.Server's Authenticate (OTLP, events) needs the
// ingest scope instead.
type resultsAuth interface {
	AuthenticateResults(ctx context.Context, headers map[string][]string) (context.Context, error)
}

// authenticateResults resolves an agent result's API key to its project, refusing a key
// without the results scope with 403 insufficient_scope. Another authenticator than
// projectauth knows no scopes: its Authenticate decides.
func (r *ingestReceiver) authenticateResults(req *http.Request) (context.Context, *apierror.Error) {
	ra, ok := r.auth.(resultsAuth)
	if !ok {
		return r.authenticate(req)
	}
	ctx, err := ra.AuthenticateResults(req.Context(), req.Header)
	return r.authOutcome(ctx, err)
}
