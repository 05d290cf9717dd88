package ingestreceiver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/lifecyclehost"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// startReal starts the receiver as a collector does (its confighttp server, the real
// projectauth extension) with settings, and returns its address and the keys of two
// projects of two accounts.
func startReal(t *testing.T, settings map[string]any) (string, [2]string) {
	t.Helper()
	addr, keys := startRealAccounts(t, settings, 2)
	return addr, [2]string(keys)
}

// startRealAccounts is startReal with the keys of n projects of n accounts.
func startRealAccounts(t *testing.T, settings map[string]any, n int) (string, []string) {
	t.Helper()
	host := lifecyclehost.New(t)
	url, err := natsclient.DefaultConfig().Resolve(host)
	require.NoError(t, err)
	_, js := testenv.Connect(t, url)
	m, err := mirror.Open(context.Background(), js, 1)
	require.NoError(t, err)
	keys := make([]string, n)
	for i := range keys {
		n := strconv.Itoa(i + 1)
		keys[i] = apikey.Generate(apikey.KindProject)
		require.NoError(t, m.PutProject(context.Background(), mirror.Project{ID: "p" + n, AccountID: "acct_" + n, Version: 1, Members: map[string]int64{"user_" + n: 1}}))
		require.NoError(t, m.PutKey(context.Background(), apikey.Hash(keys[i]), mirror.KeyEntry{KeyID: "k" + n, ProjectID: "p" + n, AccountID: "acct_" + n, Scope: mirror.ScopeProject}))
	}

	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	conf := map[string]any{"endpoint": addr, "auth": map[string]any{"authenticator": "projectauth"}}
	for k, v := range settings {
		conf[k] = v
	}
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, cfg.Unmarshal(confmap.NewFromStringMap(conf)))
	require.NoError(t, cfg.Validate())
	rcv, err := NewFactory().CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, new(consumertest.LogsSink))
	require.NoError(t, err)
	require.NoError(t, rcv.Start(context.Background(), host))
	t.Cleanup(func() { _ = rcv.Shutdown(context.Background()) })
	base := "http://" + addr
	for _, key := range keys {
		require.Eventually(t, func() bool {
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/logs", strings.NewReader(`{}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-API-Key", key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}, 20*time.Second, 20*time.Millisecond, "the key was never accepted")
	}
	return addr, keys
}

// slowSender announces a 10 MiB body and sends it a byte at a time.
type slowSender struct {
	conn net.Conn
	rd   *bufio.Reader
}

// startSlow opens the connection and returns once the receiver reads the body: the
// request asks for 100-continue, which net/http sends at the handler's first read.
func startSlow(t *testing.T, addr, key string) *slowSender {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = fmt.Fprintf(conn, "POST /v1/logs HTTP/1.1\r\nHost: receiver\r\nX-API-Key: %s\r\nContent-Type: application/x-protobuf\r\n"+
		"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", key, 10<<20)
	require.NoError(t, err)
	s := &slowSender{conn: conn, rd: bufio.NewReader(conn)}
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
	line, err := s.rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 100 Continue", strings.TrimSpace(line), "the receiver reads the slow body instead of answering at once")
	_, err = s.rd.ReadString('\n') // the blank line ending the interim answer
	require.NoError(t, err)
	return s
}

// trickle writes a byte every 100 ms until the receiver closes the connection.
func (s *slowSender) trickle(wg *sync.WaitGroup) {
	defer wg.Done()
	for range 600 {
		if _, err := s.conn.Write([]byte{0x0a}); err != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// answer is the receiver's final status line to the slow request.
func (s *slowSender) answer(t *testing.T) (int, string) {
	t.Helper()
	resp, err := http.ReadResponse(s.rd, nil)
	require.NoError(t, err, "the receiver never answered the slow body")
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Thirteen connections announcing 10 MiB and trickling their bodies used to reserve 130
// MiB of max_inflight_bytes (128 MiB) between them before a byte arrived, so every large
// request of every tenant was answered 503. Memory is now charged as bytes arrive, and a
// body that does not arrive within read_body_timeout is answered 408 and disconnected.
func TestSlowBodiesDoNotStarveLargeRequests(t *testing.T) {
	// No minimum rate: what ends these bodies is read_body_timeout.
	addr, keys := startReal(t, map[string]any{"read_body_timeout": "5s", "min_body_rate": 0})
	key := keys[0]
	var wg sync.WaitGroup
	var slow []*slowSender
	for range 13 {
		s := startSlow(t, addr, key)
		slow = append(slow, s)
		wg.Add(1)
		go s.trickle(&wg)
	}

	// An 8 MB OTLP request, three times.
	for i := range 3 {
		status, msg := postLarge(t, addr, key)
		assert.Equal(t, http.StatusOK, status, "8 MB request %d while 13 slow bodies are being read: %s", i+1, msg)
	}

	for i, s := range slow {
		status, msg := s.answer(t)
		assert.Equal(t, http.StatusRequestTimeout, status, "slow sender %d: %s", i, msg)
		assert.Contains(t, msg, "read_body_timeout", "slow sender %d", i)
	}
	wg.Wait() // each trickle ends when its connection is closed
}

// postLarge posts an 8 MB OTLP request with key and returns the answer.
func postLarge(t *testing.T, addr, key string) (int, string) {
	t.Helper()
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for range 100 {
		lrs.AppendEmpty().Body().SetStr(strings.Repeat("x", 80_000))
	}
	body, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	require.NoError(t, err)
	require.Greater(t, len(body), 8_000_000)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/logs", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// burstThenTrickle announces a 10 MiB body, sends 9.5 MB of it at once and then a byte
// every 100 ms, reading the answer meanwhile; it returns the answer (0 when the
// connection ended without one) and closes done once its burst was sent or refused.
func burstThenTrickle(t *testing.T, addr, key string, done chan<- struct{}) (int, http.Header, string) {
	return burstThenTrickleAt(t, addr, key, 10, 0, done, nil)
}

// burstThenTrickleAt is burstThenTrickle sending the rest at rate bytes a second, in
// steps every 100 ms paced on the clock (so that it keeps the rate on average however
// late a step is); it closes trickled once it has trickled for steps steps, or has its
// answer (nil: not closed).
func burstThenTrickleAt(t *testing.T, addr, key string, rate int64, steps int, done, trickled chan<- struct{}) (int, http.Header, string) {
	var trickledOnce sync.Once
	signal := func() {
		if trickled != nil {
			trickledOnce.Do(func() { close(trickled) })
		}
	}
	defer signal()
	conn, err := net.Dial("tcp", addr)
	if !assert.NoError(t, err) {
		close(done)
		return 0, nil, ""
	}
	defer conn.Close()
	// A receiver that stopped reading without closing ends the test instead of hanging it.
	_ = conn.SetDeadline(time.Now().Add(2 * time.Minute))
	type answer struct {
		status int
		header http.Header
		body   string
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answered <- answer{}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- answer{resp.StatusCode, resp.Header, string(b)}
	}()
	_, err = fmt.Fprintf(conn, "POST /v1/logs HTTP/1.1\r\nHost: receiver\r\nX-API-Key: %s\r\nContent-Type: application/x-protobuf\r\n"+
		"Content-Length: %d\r\n\r\n", key, 10<<20)
	const burst = 9_500_000
	if err == nil {
		_, err = conn.Write(bytes.Repeat([]byte{0x0a}, burst))
	}
	close(done)
	start, sent := time.Now(), int64(0)
	for step := 1; err == nil; step++ {
		select {
		case a := <-answered:
			return a.status, a.header, a.body
		case <-time.After(100 * time.Millisecond):
		}
		if step == steps {
			signal()
		}
		n := min(rate*int64(time.Since(start))/int64(time.Second)-sent, 10<<20-burst-sent-1)
		if n <= 0 {
			continue
		}
		_, err = conn.Write(bytes.Repeat([]byte{0x0a}, int(n)))
		sent += n
	}
	select {
	case a := <-answered:
		return a.status, a.header, a.body
	case <-time.After(20 * time.Second):
		return 0, nil, ""
	}
}

// The review's attack on read_body_timeout alone: thirteen connections of one account
// each send 9.5 MB of a 10 MiB body at once and then trickle the rest. Each held a 10 MiB
// buffer for the whole timeout, together all of max_inflight_bytes, and another account's
// 8 MB requests got 503. Now one account holds at most its share
// (max_inflight_bytes_per_account; its own further connections get 503 with Retry-After),
// and a body slower than min_body_rate after its first second is answered 408: another
// account's three 8 MB requests succeed.
func TestBurstThenTrickleDoesNotStarveOtherAccounts(t *testing.T) {
	// read_body_timeout is long, so that it is not what ends the trickling bodies.
	addr, keys := startReal(t, map[string]any{"read_body_timeout": "1m"})
	type result struct {
		status int
		header http.Header
		body   string
	}
	results := make(chan result, 13)
	var sent []chan struct{}
	for range 13 {
		done := make(chan struct{})
		sent = append(sent, done)
		go func() {
			s, h, b := burstThenTrickle(t, addr, keys[0], done)
			results <- result{s, h, b}
		}()
	}
	for _, done := range sent {
		<-done
	}

	for i := range 3 {
		status, msg := postLarge(t, addr, keys[1])
		assert.Equal(t, http.StatusOK, status, "another account's 8 MB request %d while 13 connections burst and trickle: %s", i+1, msg)
	}

	var slow, refused int
	for range 13 {
		r := <-results
		switch r.status {
		case 0: // refused while it was still sending, and the connection reset before the answer was read
		case http.StatusServiceUnavailable:
			refused++
			assert.Contains(t, r.body, "max_inflight_bytes_per_account")
			assert.NotEmpty(t, r.header.Get("Retry-After"), "it can pass later: %s", r.body)
		case http.StatusRequestTimeout:
			slow++
			assert.Contains(t, r.body, "min_body_rate")
		default:
			t.Errorf("a trickling connection was answered %d: %s", r.status, r.body)
		}
	}
	t.Logf("of 13 connections bursting and trickling, %d were refused for the account's share and %d answered 408 for min_body_rate", refused, slow)
	assert.Positive(t, slow, "the connections admitted are ended by min_body_rate, not read_body_timeout")
}

// The review's attack on min_body_rate: twelve connections of four accounts, three each
// (within each account's share), send 9.5 MB of a 10 MiB body at once and then the rest
// at min_body_rate. A fixed rate let each hold 10 MiB for about 15 s, together nearly all
// of max_inflight_bytes, re-bursting after, and another account's 8 MB requests got 503.
// The rate a body must keep arriving at now grows with what it holds (body_hold_window):
// 10 MiB held takes 1 MiB/s, so these are answered 408 within a few seconds of their
// burst, and the other account's requests, sent once the attack has trickled for 8 s
// (about half of what the fixed rate allowed it), succeed.
func TestBurstThenTrickleOverSeveralAccountsDoesNotStarveOthers(t *testing.T) {
	addr, keys := startRealAccounts(t, map[string]any{"read_body_timeout": "1m"}, 5)
	type result struct {
		status int
		header http.Header
		body   string
	}
	const accounts, perAccount = 4, 3
	results := make(chan result, accounts*perAccount)
	var sent, trickled []chan struct{}
	for a := range accounts {
		for range perAccount {
			done, slow := make(chan struct{}), make(chan struct{})
			sent, trickled = append(sent, done), append(trickled, slow)
			go func() {
				// 5% over the minimum, so that a late step of the test is not what ends it.
				s, h, b := burstThenTrickleAt(t, addr, keys[a], 64<<10*105/100, 80, done, slow)
				results <- result{s, h, b}
			}()
		}
	}
	for _, done := range sent {
		<-done
	}
	for _, slow := range trickled {
		<-slow
	}

	for i := range 3 {
		status, msg := postLarge(t, addr, keys[accounts])
		assert.Equal(t, http.StatusOK, status, "another account's 8 MB request %d after 12 connections of 4 accounts burst and trickled: %s", i+1, msg)
	}

	var slow int
	for range accounts * perAccount {
		r := <-results
		switch r.status {
		case 0: // refused while it was still sending, and the connection reset before the answer was read
		case http.StatusServiceUnavailable:
			assert.NotEmpty(t, r.header.Get("Retry-After"), "it can pass later: %s", r.body)
		case http.StatusRequestTimeout:
			slow++
			assert.Contains(t, r.body, "body_hold_window")
		default:
			t.Errorf("a trickling connection was answered %d: %s", r.status, r.body)
		}
	}
	assert.Positive(t, slow, "the connections are ended for their rate, not read_body_timeout")
}

// A small body is held to no rate: a device on a slow link sending 20 KB at 10 KB/s was
// answered 408 for min_body_rate after its first second, every time, and OTLP exporters
// do not retry 408. It holds no more than its first buffer, so read_body_timeout alone
// bounds it.
func TestSmallSlowBodyIsStored(t *testing.T) {
	addr, keys := startReal(t, map[string]any{"read_body_timeout": "1m"})
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr(strings.Repeat("x", 20_000))
	body, err := plogotlp.NewExportRequestFromLogs(ld).MarshalJSON()
	require.NoError(t, err)
	require.Greater(t, len(body), 20_000)

	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /v1/logs HTTP/1.1\r\nHost: receiver\r\nX-API-Key: %s\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\n\r\n", keys[0], len(body))
	require.NoError(t, err)
	// 2 KB every 200 ms: about 2 s for the body, at a sixth of min_body_rate.
	for rest := body; len(rest) > 0; {
		n := min(2000, len(rest))
		_, err := conn.Write(rest[:n])
		require.NoError(t, err, "the receiver closed the connection while the body was sent")
		rest = rest[n:]
		if len(rest) > 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
}
