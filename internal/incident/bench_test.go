package incident

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// BenchmarkApply measures one batch's Apply of a fingerprint whose incident is open
// (the common case: no open-slot read) and of one that opens a new incident.
func BenchmarkApply(b *testing.B) {
	srv := testenv.StartNATS(b)
	_, js := testenv.Connect(b, srv.URL())
	s, err := Open(context.Background(), js, 1)
	require.NoError(b, err)
	ctx := context.Background()
	b.Run("join", func(b *testing.B) {
		for i := range b.N {
			_, err := s.Apply(ctx, "p1", defaults, Join{Fingerprint: "hot", BatchKey: strconv.Itoa(i), Events: 3, Title: "t", At: time.Now()})
			require.NoError(b, err)
		}
	})
	b.Run("open", func(b *testing.B) {
		s.maxOpen = 1 << 30
		for i := range b.N {
			_, err := s.Apply(ctx, "p2", defaults, Join{Fingerprint: "fp" + strconv.Itoa(i), BatchKey: "1", Events: 1, Title: "t", At: time.Now()})
			require.NoError(b, err)
		}
	})
}
