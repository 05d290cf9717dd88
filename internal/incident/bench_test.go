package incident

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
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
	// A hot fingerprint's batches of 100 records, every other one its event: the
	// counted ranges stay at their bound and each Apply checks and merges them.
	b.Run("join-seqs", func(b *testing.B) {
		for i := range b.N {
			seqs := make([]uint64, 50)
			for k := range seqs {
				seqs[k] = uint64(i*100 + 2*k + 1)
			}
			_, err := s.Apply(ctx, "p1", defaults, Join{Fingerprint: "hot-seqs", Seqs: seqs, Title: "t", At: time.Now()})
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

// BenchmarkDecode compares what a watcher of every f-key decodes per write: the whole
// incident (a full timeline, outbox and counted ranges) against its DueState.
func BenchmarkDecode(b *testing.B) {
	i := open("p1", FingerprintHash("f"), 1, Join{Fingerprint: "f", Events: 1, At: t0})
	for k := range maxTimeline {
		i.add(Entry{At: t0.Add(time.Duration(k) * time.Hour), Type: "result", Detail: strings.Repeat("x", 300), RequestID: "req_" + strconv.Itoa(k)})
		if k < maxOutbox {
			i.notice(NoticeUpdated, "call", "", t0, strings.Repeat("y", 100))
		}
	}
	seqs := make([]uint64, 0, 2*maxCounted)
	for k := range 2 * maxCounted {
		seqs = append(seqs, uint64(3*k))
	}
	i.Counted = count(nil, seqs, t0)
	v, err := json.Marshal(i)
	require.NoError(b, err)
	b.Logf("value %d bytes", len(v))
	b.Run("incident", func(b *testing.B) {
		for range b.N {
			var inc Incident
			require.NoError(b, json.Unmarshal(v, &inc))
		}
	})
	b.Run("due-state", func(b *testing.B) {
		for range b.N {
			_, err := DueStateOf(v)
			require.NoError(b, err)
		}
	})
}
