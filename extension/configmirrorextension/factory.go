// Package configmirrorextension holds the data plane's in-memory copy of the
// configuration mirror (internal/collector/mirrorcache), which receivers, processors,
// exporters and the projectauth authenticator find through their `mirror` setting, and
// answers the control plane's pipeline checks and backlog previews
// (internal/collector/validationresponder) from every collector role.
package configmirrorextension

//go:generate ../../bin/mdatagen metadata.yaml

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-svc/otelcol-svc/extension/configmirrorextension/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
)

// NewFactory returns the extension's factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	return &Config{NATS: natsclient.DefaultConfig()}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newConfigMirror(cfg.(*Config), set), nil
}
