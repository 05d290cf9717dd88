package requestid

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func testIssuer(t testing.TB, fill byte) *Issuer {
	t.Helper()
	iss, err := NewIssuer(bytes.Repeat([]byte{fill}, KeyBytes))
	require.NoError(t, err)
	return iss
}

func TestIdsKeepTheirShape(t *testing.T) {
	iss := testIssuer(t, 1)
	seen := map[string]bool{}
	for range 100 {
		id := iss.New("p1")
		require.Len(t, id, 36, "req_ and 32 hex, as agents were always sent")
		require.True(t, strings.HasPrefix(id, "req_"))
		require.True(t, lowerHex(id[4:]), id)
		require.False(t, seen[id], "ids are unique")
		seen[id] = true
	}
}

func TestIssuedToAVerifiesForAOnly(t *testing.T) {
	iss := testIssuer(t, 1)
	id := iss.New("proj_a")
	assert.True(t, iss.Issued("proj_a", id))
	assert.False(t, iss.Issued("proj_b", id), "an id issued to A is foreign under B")
	assert.False(t, iss.Issued("proj_a|", id))
	assert.False(t, testIssuer(t, 2).Issued("proj_a", id), "another deployment's key does not know it")
}

func TestMadeUpIdsFail(t *testing.T) {
	iss := testIssuer(t, 1)
	for _, id := range []string{
		"", "req_1", "abc", "req_" + strings.Repeat("0", 32), "req_" + strings.Repeat("f", 32),
		"req_00112233445566778899aabbccddeeff", // the old, random-only form
		strings.Repeat("x", 36),
	} {
		assert.False(t, iss.Issued("p1", id), id)
	}
}

func TestTamperingFails(t *testing.T) {
	iss := testIssuer(t, 1)
	id := iss.New("p1")
	for i := len(prefix); i < len(id); i++ {
		b := []byte(id)
		b[i] = "0123456789abcdef"[(strings.IndexByte("0123456789abcdef", b[i])+1)%16]
		assert.False(t, iss.Issued("p1", string(b)), "changed hex digit %d of %s", i, id)
	}
	assert.False(t, iss.Issued("p1", strings.ToUpper(id[:4])+id[4:]))
	assert.False(t, iss.Issued("p1", id[:4]+strings.ToUpper(id[4:])), "only the form we sent")
	assert.False(t, iss.Issued("p1", id+"0"))
	assert.False(t, iss.Issued("p1", id[:len(id)-1]))
	assert.False(t, iss.Issued("p1", " "+id))
}

func TestTheKeyStaysOutOfFormattedOutput(t *testing.T) {
	iss := testIssuer(t, 0xAB)
	for _, s := range []string{fmt.Sprint(iss), fmt.Sprintf("%v %+v %#v %s", iss, iss, iss, iss)} {
		assert.NotContains(t, strings.ToLower(s), "ab ab")
		assert.NotContains(t, s, "171") // 0xAB in decimal, as %v prints a byte slice
	}
}

func TestNewIssuerWantsAFullKey(t *testing.T) {
	_, err := NewIssuer(make([]byte, 16))
	require.ErrorIs(t, err, ErrBadKey)
}

func TestLoadSharesOneKey(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Processes starting together on a new deployment all create the key at once.
	const racers = 4
	issuers := make([]*Issuer, racers)
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		_, js := testenv.Connect(t, n.URL())
		wg.Add(1)
		go func() {
			defer wg.Done()
			issuers[i], errs[i] = Load(ctx, js)
		}()
	}
	wg.Wait()
	for i := range racers {
		require.NoError(t, errs[i])
	}
	id := issuers[0].New("p1")
	for i := range racers {
		assert.True(t, issuers[i].Issued("p1", id), "process %d recognises process 0's id", i)
	}

	// A process that starts later, after a NATS restart, reads the stored key.
	n.Stop()
	n.Start(t)
	_, js := testenv.Connect(t, n.URL())
	later, err := Load(ctx, js)
	require.NoError(t, err)
	assert.True(t, later.Issued("p1", id))
	assert.True(t, issuers[1].Issued("p1", later.New("p1")))
}

func TestLoadRefusesAMalformedKey(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, js := testenv.Connect(t, n.URL())
	kv, err := openBucket(ctx, js)
	require.NoError(t, err)
	_, err = kv.Put(ctx, KeyName, []byte("short"))
	require.NoError(t, err)
	_, err = Load(ctx, js)
	require.ErrorIs(t, err, ErrBadKey)
	e, err := kv.Get(ctx, KeyName)
	require.NoError(t, err)
	assert.Equal(t, "short", string(e.Value()), "Load does not replace a key others may use")
}

func TestLoadFailsWithoutNATS(t *testing.T) {
	n := testenv.StartNATS(t)
	nc, js := testenv.Connect(t, n.URL())
	nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iss, err := Load(ctx, js)
	require.Error(t, err)
	assert.Nil(t, iss)
	assert.Contains(t, err.Error(), Bucket)
}

func FuzzIssued(f *testing.F) {
	iss, err := NewIssuer(bytes.Repeat([]byte{7}, KeyBytes))
	if err != nil {
		f.Fatal(err)
	}
	// Built, not from New: fuzz workers are other processes and must agree on it.
	random := strings.Repeat("5a", randomHex/2)
	real := prefix + random + hex.EncodeToString(iss.tag("p1", random))
	if !iss.Issued("p1", real) {
		f.Fatal("the seed id does not verify")
	}
	for _, s := range []string{real, real[:35] + "x", "req_", "", strings.ToUpper(real), "req_" + strings.Repeat("é", 16)} {
		f.Add("p1", s)
		f.Add("p2", s)
	}
	f.Fuzz(func(t *testing.T, project, id string) {
		ok := iss.Issued(project, id)
		if ok && (len(id) != Len || !strings.HasPrefix(id, "req_")) {
			t.Fatalf("accepted %q, which New never returns", id)
		}
		if ok && !(project == "p1" && id == real) {
			t.Fatalf("a made-up id verified: %q for %q", id, project)
		}
		// Any project's fresh id verifies for it, and only it.
		fresh := iss.New(project)
		if !iss.Issued(project, fresh) {
			t.Fatalf("a fresh id for %q did not verify", project)
		}
		if iss.Issued(project+"x", fresh) {
			t.Fatalf("a fresh id for %q verified for %q", project, project+"x")
		}
	})
}

// The key lives in a bucket of its own: the configuration mirror's buckets are the
// control plane's (it prunes entries it did not write, and the data plane decodes every
// entry as configuration), so a key stored there was logged as undecodable at each start
// and could be pruned, turning every issued id unmatched.
func TestTheKeyStaysOutOfTheMirrorsBuckets(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ms, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	_, err = Load(ctx, js)
	require.NoError(t, err)
	for _, kv := range ms.Watched() {
		require.NotEqual(t, kv.Bucket(), Bucket)
		_, err := kv.Get(ctx, KeyName)
		assert.ErrorIs(t, err, jetstream.ErrKeyNotFound, "the request-id key is in mirror bucket %s", kv.Bucket())
	}
}
