package incidentprocessor

import (
	"testing"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/lifecyclehost"
)

// newLifecycleHost is the host of the generated lifecycle test (metadata.yaml tests.host):
// the embedded NATS, configmirror and projectauth extensions, real and started.
func newLifecycleHost(t *testing.T) component.Host { return lifecyclehost.New(t) }
