package mirror

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
)

// A write that failed because NATS was away (seen as "outbound buffer limit exceeded"
// while the client reconnects) is a retry-later, which the control plane answers 503; any
// other failure is not.
func TestWritesThatNATSCouldNotTakeAreUnavailable(t *testing.T) {
	for _, err := range []error{nats.ErrReconnectBufExceeded, nats.ErrConnectionClosed, nats.ErrTimeout, nats.ErrNoResponders} {
		assert.ErrorIs(t, unreachable(err), ErrUnavailable, err.Error())
		assert.ErrorIs(t, unreachable(err), err, "the cause stays visible")
	}
	assert.NotErrorIs(t, unreachable(errors.New("maximum payload exceeded")), ErrUnavailable)
}
