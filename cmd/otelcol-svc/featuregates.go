package main

// Not generated: ocb writes main.go, main_others.go, main_windows.go and components.go
// (the Makefile's GENERATED) and leaves this file alone.

import (
	"go.opentelemetry.io/collector/featuregate"

	// Imported for its feature gate's registration, which must precede init below (a
	// package's imports are initialised before it); components.go imports it too.
	_ "github.com/open-telemetry/opentelemetry-collector-contrib/extension/healthcheckextension"
)

// healthFromComponentStatus is the contrib health_check's feature gate that makes its
// answer follow the components' statuses instead of only "the collector started". Our
// components report a lost NATS connection as a recoverable error
// (internal/collector/natsclient), so with the gate on a process whose NATS is gone is not
// reported healthy.
//
// It is turned on here, where the distribution's binary is built, because it is the
// distribution's choice, not a component's: set from a component's init() it depended on
// which packages happened to be linked, and a command-line flag in the configs or the
// Makefile would leave every other way of starting the binary (a container, a unit file,
// the tests' processes) answering healthy without NATS. init runs before the command
// parses its flags, so `--feature-gates=-extension.healthcheck.useComponentStatus` still
// turns it off (the shipped configs' health_check settings then need the legacy form).
const healthFromComponentStatus = "extension.healthcheck.useComponentStatus"

func init() {
	if err := featuregate.GlobalRegistry().Set(healthFromComponentStatus, true); err != nil {
		panic(err) // the contrib module changed the gate: the health check would lie again
	}
}
