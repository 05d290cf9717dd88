// Package projectauthextension resolves API keys to projects. It implements the
// collector's server-authenticator interface, so it plugs into `auth: authenticator:` of
// the stock otlpreceiver (gRPC metadata x-api-key) as well as our ingest receiver, and,
// as gRPC server middleware, bounds what decoding an OTLP/gRPC request may cost. Keys are
// looked up in the configuration mirror of the configmirror extension its `mirror`
// setting names.
package projectauthextension

//go:generate ../../bin/mdatagen metadata.yaml

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-svc/otelcol-svc/extension/projectauthextension/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
)

// NewFactory returns the extension's factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	return &Config{Mirror: mirrorcache.DefaultExtension, PushIngest: PushIngestConfig{Auth: "on"}, GRPC: GRPCLimitsConfig{MaxRecordsPerRequest: 10000, MaxInflightBytes: 128 << 20}}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newAuthenticator(cfg.(*Config), set)
}
