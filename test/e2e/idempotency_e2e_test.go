package e2e

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// An Idempotency-Key is bound to the request it first came with:
// the same request again gets the first answer and is stored once; any other request
// under that key gets 422 idempotency_key_reused and stores nothing. Before, the other
// request was answered 202 "accepted" and its records dropped as duplicates.
func TestIdempotencyKeyIsBoundToItsFirstRequest(t *testing.T) {
	for _, mode := range []string{"async", "fast_batch", "atomic_batch"} {
		t.Run(mode, func(t *testing.T) {
			e := startReceiver(t, map[string]string{"SVC_PUBLISH_MODE": mode, "SVC_USAGE_METERING": "false"})
			key := e.project(t, "idem")
			events, batch := e.col.HTTP+"/v1/events", e.col.HTTP+"/v1/events/batch"
			idem := func(k string, more ...string) map[string]string {
				h := map[string]string{"Idempotency-Key": k}
				for i := 0; i+1 < len(more); i += 2 {
					h[more[i]] = more[i+1]
				}
				return h
			}
			accepted := func(r response) int {
				t.Helper()
				require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
				var a struct{ Accepted int }
				require.NoError(t, json.Unmarshal(r.Body, &a))
				return a.Accepted
			}
			reused := func(r response) {
				t.Helper()
				require.Equal(t, http.StatusUnprocessableEntity, r.StatusCode, "%s", r.Body)
				assert.Equal(t, "idempotency_key_reused", errorCode(t, r))
			}

			// Another body under a key already used, for one event and for a batch.
			assert.Equal(t, 1, accepted(post(t, events, key, "application/json", []byte(`{"order":1}`), idem("o-1"))))
			reused(post(t, events, key, "application/json", []byte(`{"order":2}`), idem("o-1")))
			assert.Equal(t, 2, accepted(post(t, batch, key, "application/json", []byte(`[{"b":1},{"b":2}]`), idem("b-1"))))
			reused(post(t, batch, key, "application/json", []byte(`[{"b":1},{"b":2},{"b":3}]`), idem("b-1")))

			// What shapes the records counts as the request: a header that becomes a field,
			// the path, the body's format.
			reused(post(t, events, key, "application/json", []byte(`{"order":1}`), idem("o-1", "X-Event-Type", "refund")))
			reused(post(t, batch, key, "application/json", []byte(`[{"order":1}]`), idem("o-1")))
			reused(post(t, batch, key, "application/x-ndjson", []byte(`{"b":1}`+"\n"+`{"b":2}`), idem("b-1")))

			// The same request again: the first answer, nothing stored twice.
			assert.Equal(t, 1, accepted(post(t, events, key, "application/json", []byte(`{"order":1}`), idem("o-1"))))
			assert.Equal(t, 2, accepted(post(t, batch, key, "application/json", []byte(`[{"b":1},{"b":2}]`), idem("b-1"))))

			var got []string
			for _, m := range stored(t, e.js, "idem") {
				got = append(got, string(m.Data))
			}
			assert.Equal(t, []string{`{"order":1}`, `{"b":1}`, `{"b":2}`}, got, "each first request once, nothing of the refused ones")
		})
	}
}

// Push sources bind their keys per source, as their message ids are.
func TestSourcePushIdempotencyKeyIsBoundToItsFirstDelivery(t *testing.T) {
	e := startReceiver(t, map[string]string{"SVC_USAGE_METERING": "false"})
	e.project(t, "idemsrc")
	src := e.source(t, githubSource("idemsrc"), nil)
	h := map[string]string{"Authorization": "Bearer " + src.APIKey, "Idempotency-Key": "delivery-1"}
	r := post(t, src.url(e.col.HTTP), "", "application/json", []byte(`{"action":"opened"}`), h)
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	r = post(t, src.url(e.col.HTTP), "", "application/json", []byte(`{"action":"closed"}`), h)
	require.Equal(t, http.StatusUnprocessableEntity, r.StatusCode, "%s", r.Body)
	assert.Equal(t, "idempotency_key_reused", errorCode(t, r))
	r = post(t, src.url(e.col.HTTP), "", "application/json", []byte(`{"action":"opened"}`), h)
	require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	assert.JSONEq(t, `{"accepted":1}`, string(r.Body))
	assert.Len(t, stored(t, e.js, "idemsrc"), 1)
}

// Two receiver processes taking one key at once with different requests: exactly one
// request is stored, every other one is refused, and the winner's retries still pass.
func TestIdempotencyKeyRaceAcrossReceivers(t *testing.T) {
	e := startReceiver(t, map[string]string{"SVC_USAGE_METERING": "false"})
	key := e.project(t, "race")
	other := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml",
		Env: map[string]string{"NATS_URL": e.nats.URL(), "SVC_STREAM_REPLICAS": "1", "SVC_USAGE_METERING": "false"}})
	waitAccepted(t, other.HTTP, key)
	bases := []string{e.col.HTTP, other.HTTP}

	for round := range 5 {
		k := "race-" + strconv.Itoa(round)
		var mu sync.Mutex
		answers := map[int][]string{} // status → bodies sent
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := `[{"round":` + strconv.Itoa(round) + `,"writer":` + strconv.Itoa(i) + `},{"n":2}]`
				r := post(t, bases[i%2]+"/v1/events/batch", key, "application/json", []byte(body), map[string]string{"Idempotency-Key": k})
				mu.Lock()
				answers[r.StatusCode] = append(answers[r.StatusCode], body)
				mu.Unlock()
			}()
		}
		wg.Wait()
		require.Len(t, answers[http.StatusAccepted], 1, "round %d: one request wins the key: %v", round, slices.Collect(maps.Keys(answers)))
		require.Len(t, answers[http.StatusUnprocessableEntity], 7, "round %d: the others are refused", round)
		winner := answers[http.StatusAccepted][0]
		r := post(t, bases[1]+"/v1/events/batch", key, "application/json", []byte(winner), map[string]string{"Idempotency-Key": k})
		require.Equal(t, http.StatusAccepted, r.StatusCode, "%s", r.Body)
	}
	assert.Len(t, stored(t, e.js, "race"), 5*2, "each round's winner, once")
}
