// Package embeddednatsextension runs an in-process nats-server with JetStream, so the
// embedded default needs no external service. It listens on a TCP address so that other
// processes on the machine (the control plane, a second collector) can use it too.
package embeddednatsextension

//go:generate ../../bin/mdatagen metadata.yaml

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-svc/otelcol-svc/extension/embeddednatsextension/internal/metadata"
)

// NewFactory returns the extension's factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	return &Config{Listen: "127.0.0.1:4223", StoreDir: "./data/nats"}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return &embeddedNATS{cfg: cfg.(*Config), logger: set.Logger}, nil
}
