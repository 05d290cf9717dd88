package projectauthextension

import (
	"go.opentelemetry.io/collector/featuregate"

	// Imported for its feature gate's registration, which must precede init below.
	_ "github.com/open-telemetry/opentelemetry-collector-contrib/extension/healthcheckextension"
)

// healthFromComponentStatus is the contrib health_check's feature gate that makes its
// answer follow the components' statuses instead of only "the collector started". Our
// components report a lost NATS connection as a recoverable error (internal/collector/natsclient),
// so with the gate on a process whose NATS is gone is not reported healthy. The
// distribution turns it on here, in the extension every role's config has;
// `--feature-gates=-extension.healthcheck.useComponentStatus` turns it off again (the
// shipped configs' health_check settings then need the legacy form).
const healthFromComponentStatus = "extension.healthcheck.useComponentStatus"

func init() {
	if err := featuregate.GlobalRegistry().Set(healthFromComponentStatus, true); err != nil {
		panic(err) // the contrib module changed the gate: the health check would lie again
	}
}
