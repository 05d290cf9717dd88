// Package helmtest tests the Helm chart in deploy/helm/otelcol-svc: it lints and renders
// the chart with helm (the pinned one `make helm` builds into bin/) and decodes every
// object into the Kubernetes API types, strictly. See chart_test.go.
package helmtest
