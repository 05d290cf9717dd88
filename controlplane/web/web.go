// Package web holds the dashboard's built assets for the control plane to serve at /.
//
// `npm ci && npm run build` in this directory writes dist/ (gitignored but for
// dist/placeholder.html, so the embed below always has something to take): a fresh clone
// builds and tests without Node, and its dashboard is a page saying how to build it.
package web

import (
	"embed"
	"io/fs"
)

//go:embed dist
var dist embed.FS

// Assets is the built dashboard: index.html, assets/..., and placeholder.html.
func Assets() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed above names dist; this cannot fail
	}
	return sub
}

// Built reports whether the assets hold a real build (index.html) rather than only the
// placeholder.
func Built() bool {
	_, err := fs.Stat(Assets(), "index.html")
	return err == nil
}
