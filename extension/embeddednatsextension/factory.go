// Package embeddednatsextension runs an in-process nats-server with JetStream, so the
// embedded default needs no external service. It listens on a TCP address so that other
// processes on the machine (the control plane, a second collector) can use it too.
package embeddednatsextension

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
)

var typeStr = component.MustNewType("embeddednats")

// NewFactory returns the extension's factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(typeStr, createDefaultConfig, create, component.StabilityLevelBeta)
}

func createDefaultConfig() component.Config {
	return &Config{Listen: "127.0.0.1:4223", StoreDir: "./data/nats"}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return &embeddedNATS{cfg: cfg.(*Config), logger: set.Logger}, nil
}
