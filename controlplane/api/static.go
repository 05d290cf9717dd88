package api

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/otelcol-svc/otelcol-svc/controlplane/web"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

// The dashboard (docs/contract.md#section-13) is served from the same origin as the API: the
// built assets under /assets/, and index.html for every other path outside the API's
// prefixes, so the page's own router can show /projects/p_1/keys after a reload.

// apiPrefixes keep their JSON answers: an unknown path there is a JSON 404, never the page.
var apiPrefixes = []string{"/api/", "/mcp/", "/healthz/", "/readyz/", "/.well-known/"}

func isAPIPath(p string) bool {
	for _, pre := range apiPrefixes {
		if p == strings.TrimSuffix(pre, "/") || strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}

type asset struct {
	body, gz    []byte
	contentType string
	etag        string
}

// loadAssets reads every embedded file once, with a gzipped copy for clients that take
// it (the assets are small; compressing at start keeps each request to a copy).
func loadAssets(fsys fs.FS) map[string]*asset {
	out := map[string]*asset{}
	_ = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		a := &asset{body: body, etag: `"` + hex.EncodeToString(sum[:8]) + `"`,
			contentType: mime.TypeByExtension(path.Ext(p))}
		if a.contentType == "" {
			a.contentType = "application/octet-stream"
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(body)
		_ = zw.Close()
		if buf.Len() < len(body) {
			a.gz = buf.Bytes()
		}
		out[p] = a
		return nil
	})
	return out
}

// contentSecurityPolicy allows only this origin's scripts and styles (no inline ones),
// and fetches to this origin and the receiver, which serves the console reads.
func contentSecurityPolicy(receiverURL string) string {
	connect := "'self'"
	if u, err := url.Parse(receiverURL); err == nil && u.Scheme != "" && u.Host != "" {
		connect += " " + u.Scheme + "://" + u.Host
	}
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; " +
		"connect-src " + connect + "; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"
}

// dashboard serves the page and its assets, and the JSON 404 under the API's prefixes.
func (s *Server) dashboard() http.HandlerFunc {
	assets := loadAssets(web.Assets())
	index := assets["index.html"]
	if index == nil || !web.Built() {
		index = assets["placeholder.html"]
	}
	csp := contentSecurityPolicy(s.Svc.ReceiverURL)
	return func(w http.ResponseWriter, r *http.Request) {
		if isAPIPath(r.URL.Path) {
			apierror.Write(w, apierror.New(http.StatusNotFound, apierror.NotFound, "no endpoint "+r.URL.Path))
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			apierror.Write(w, apierror.New(http.StatusMethodNotAllowed, apierror.MethodNotAllowed, r.Method+" is not allowed here"))
			return
		}
		a := index
		if strings.HasPrefix(r.URL.Path, "/assets/") {
			a = assets[strings.TrimPrefix(path.Clean(r.URL.Path), "/")]
			if a == nil {
				http.Error(w, "no such asset", http.StatusNotFound)
				return
			}
		}
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		// Revalidated on each load (the ETag makes that a 304), so a new build shows at
		// once without hashed file names.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Set("Vary", "Accept-Encoding")
		h.Set("Content-Type", a.contentType)
		if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, a.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		body := a.body
		if a.gz != nil && acceptsGzip(r) {
			h.Set("Content-Encoding", "gzip")
			body = a.gz
		}
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusOK)
			return
		}
		_, _ = w.Write(body)
	}
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}
