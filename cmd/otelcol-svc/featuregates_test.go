package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/featuregate"
)

// The binary's health check follows the components' statuses (a lost NATS answers 500)
// unless the command line turns the gate off.
func TestHealthFollowsComponentStatus(t *testing.T) {
	var on, found bool
	featuregate.GlobalRegistry().VisitAll(func(g *featuregate.Gate) {
		if g.ID() == healthFromComponentStatus {
			found, on = true, g.IsEnabled()
		}
	})
	assert.True(t, found, "the contrib health_check no longer registers the gate")
	assert.True(t, on)
}
