package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

// CORS: the dashboard is served by the control plane, another origin than the
// receiver's, and its pages call this API from the browser with a console token. Only
// the configured origins (the dashboard's) are answered with Access-Control-Allow-Origin:
// a page of any other site gets nothing its browser will let it read, even when it holds
// a credential. No cookie is ever involved (credentials travel in headers), so
// Access-Control-Allow-Credentials is never sent.

// allowHeaders are the request headers the console's callers send.
const allowHeaders = "Authorization, X-API-Key, Content-Type, Idempotency-Key"

// setCORS answers CORS for req's Origin when it is allowed, with the endpoint's methods.
func (a *API) setCORS(w http.ResponseWriter, req *http.Request, methods string) {
	h := w.Header()
	// Caches must key on Origin: an answer for the dashboard carries its origin, one for
	// another page none.
	h.Add("Vary", "Origin")
	origin := req.Header.Get("Origin")
	if origin == "" || !a.origins[origin] {
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Methods", methods)
	h.Set("Access-Control-Allow-Headers", allowHeaders)
	// The dashboard waits as 503 answers say, which it can only read when exposed.
	h.Set("Access-Control-Expose-Headers", "Retry-After")
	h.Set("Access-Control-Max-Age", "600")
}

// ParseOrigins checks the configured origins and returns them as browsers send them in
// Origin (lowercase scheme and host, no trailing slash). An entry may hold several
// origins separated by commas (one environment variable naming them all).
func ParseOrigins(entries []string) ([]string, error) {
	var out []string
	for _, entry := range entries {
		for _, o := range strings.Split(entry, ",") {
			o = strings.TrimSpace(o)
			if o == "" {
				continue
			}
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
				(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
				return nil, fmt.Errorf("%q is not an origin: write scheme://host[:port], e.g. http://localhost:8080 (the dashboard's address, without a path)", o)
			}
			out = append(out, strings.ToLower(u.Scheme)+"://"+strings.ToLower(u.Host))
		}
	}
	return out, nil
}

// writeRefusal answers an error, with its details beside the code and message.
func writeRefusal(w http.ResponseWriter, r *refusal) {
	if len(r.details) == 0 {
		apierror.Write(w, r.Error)
		return
	}
	obj := map[string]any{"code": r.Code, "message": r.Message}
	for k, v := range r.details {
		if k != "code" && k != "message" {
			obj[k] = v
		}
	}
	if r.RetryAfter > 0 {
		w.Header().Set("Retry-After", apierror.RetryAfterSeconds(r.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(r.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]any{"error": obj})
}
