package service

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// SVC_AUDIT_RETENTION takes days or a Go duration, and refuses what would keep (almost)
// nothing or is not a length of time.
func TestParseRetention(t *testing.T) {
	for in, want := range map[string]time.Duration{"90d": 90 * 24 * time.Hour, "1d": 24 * time.Hour, "2160h": 2160 * time.Hour, "1h": time.Hour} {
		got, err := ParseRetention(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0d", "-1d", "30m", "90 days", "d", "1.5d", "99999d"} {
		_, err := ParseRetention(in)
		assert.Error(t, err, in)
	}
}
