package ingestreceiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
)

// Memory a request costs while it is read, decoded and stored, as estimated before it is
// decoded. Measured with pdata v1.68 (bytes of heap per body byte or record, decoded and
// flattened): big strings about 2.4× the body, tiny attributes 1.7×, deep arrays 2.2×;
// each record about 360 bytes (140 decoded, 220 flattened), plus its NATS message and ack
// while it is published. With the body itself held throughout, 4× the body and 1 KiB per
// record cover every shape measured.
const (
	costPerBodyByte = 4
	costPerRecord   = 1024
)

// admission bounds the bytes that requests being read and decoded may hold at once
// (max_inflight_bytes): a request that would go past it is answered 503 with Retry-After
// at once (it can succeed once others are done), so that concurrent large requests cannot
// take the process's memory, whatever their number.
//
// Within it, one tenant (an account, or a project whose key names none) holds at most
// perTenant (max_inflight_bytes_per_account) of body bytes: a sender that makes its
// requests slow or many fills only its own share, and its next request is the one
// answered 503, while the other tenants keep the rest. The share counts the bodies an
// account makes the receiver hold, not their decoding estimate: at 4× the body plus 1 KiB
// a record, one request at the body limit is estimated at about 50 MiB, so a share of the
// estimate took one large request at a time, and a collector sending large batches in
// parallel saw 503 for nearly all of them. The estimate is still what max_inflight_bytes
// counts. A tenant's request alone may still take the whole budget, so one at the body
// limit is never refused forever.
type admission struct {
	sem       *semaphore.Weighted
	budget    int64
	perTenant int64

	mu   sync.Mutex
	body map[string]int64 // tenant -> body bytes its tickets hold; absent when none
}

func newAdmission(budget, perTenant int64) *admission {
	if perTenant <= 0 || perTenant > budget {
		perTenant = budget
	}
	return &admission{sem: semaphore.NewWeighted(budget), budget: budget, perTenant: perTenant, body: map[string]int64{}}
}

// ticket is what one request holds of the budget; release it when the request is done.
type ticket struct {
	a      *admission
	tenant string
	held   int64 // of max_inflight_bytes: the buffer while reading, then the estimate
	body   int64 // of the tenant's share: the buffer, read or being read
}

func (a *admission) ticket(tenant string) *ticket { return &ticket{a: a, tenant: tenant} }

// tenantOf is whose share of max_inflight_bytes a request takes: its account, the unit
// that signs up (one account may make many projects), or its project when the credential
// names no account (keys minted before keys carried it).
func tenantOf(ctx context.Context) string {
	p, _ := principal.FromContext(ctx)
	if p.AccountID != "" {
		return "account:" + p.AccountID
	}
	return "project:" + p.ProjectID
}

// Why reserve refused: the whole budget, or the tenant's share of it.
var (
	errNoRoom       = errors.New("max_inflight_bytes has no room for the request")
	errTenantNoRoom = errors.New("max_inflight_bytes_per_account has no room for the request")
)

// reserve sets what the request holds of max_inflight_bytes to total bytes, its decoding
// estimate once the body is read (downwards too); errNoRoom when there is no room now.
// The tenant's share keeps counting the body.
func (t *ticket) reserve(total int64) error { return t.set(total, t.body) }

// reading sets what the request holds to its body buffer of n bytes, both of
// max_inflight_bytes and of the tenant's share; errNoRoom or errTenantNoRoom when there
// is no room now.
func (t *ticket) reading(n int64) error { return t.set(n, n) }

func (t *ticket) set(total, body int64) error {
	a := t.a
	n := min(total, a.budget) - t.held
	b := min(body, a.budget) - t.body
	if n == 0 && b == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if b > 0 {
		if others := a.body[t.tenant] - t.body; others > 0 && others+t.body+b > a.perTenant {
			return errTenantNoRoom
		}
	}
	if n > 0 && !a.sem.TryAcquire(n) {
		return errNoRoom
	}
	if n < 0 {
		a.sem.Release(-n)
	}
	t.held += n
	t.body += b
	if v := a.body[t.tenant] + b; v > 0 {
		a.body[t.tenant] = v
	} else {
		delete(a.body, t.tenant)
	}
	return nil
}

func (t *ticket) release() {
	if t.held > 0 || t.body > 0 {
		_ = t.set(0, 0)
	}
}

// busy is the answer to a request that reserve found no room for (why).
func (r *ingestReceiver) busy(why error) *apierror.Error {
	msg := fmt.Sprintf("the receiver is already reading and decoding as many bytes as it may hold at once (max_inflight_bytes, %d MiB); retry in a few seconds", r.cfg.MaxInflightBytes>>20)
	if errors.Is(why, errTenantNoRoom) {
		msg = fmt.Sprintf("your account's other requests already hold its share of what the receiver reads and decodes at once (%s, %d MiB); retry in a few seconds, once they are done, or send fewer requests at once", tenantShareSetting, r.admit.perTenant>>20)
	}
	e := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable, msg)
	e.RetryAfter = r.cfg.RetryAfter
	return e
}

// admittedBody reads a JSON surface's body under the request's account ticket and
// reserves what decoding it will hold; a refusal is counted for the account. The caller
// releases the ticket when the request is done.
func (r *ingestReceiver) admittedBody(ctx context.Context, req *http.Request) (*ticket, []byte, *apierror.Error) {
	t := r.admit.ticket(tenantOf(ctx))
	body, aerr := r.readBody(req, t)
	if aerr != nil {
		t.release()
		return nil, nil, r.countRefusal(ctx, aerr, 1)
	}
	if err := t.reserve(costPerBodyByte * int64(len(body))); err != nil {
		t.release()
		return nil, nil, r.countRefusal(ctx, r.busy(err), 1)
	}
	return t, body, nil
}

// readBody reads the (already decompressed) body within the configured limit. What it
// holds is charged to the budget as it arrives, not as announced: a client announcing
// 10 MB and sending a byte now and then holds a small buffer, so a few such clients
// cannot make every large request of everyone else answer 503. The caller corrects the
// charge to the request's decoding cost once the body is read.
func (r *ingestReceiver) readBody(req *http.Request, t *ticket) ([]byte, *apierror.Error) {
	limit := r.cfg.MaxRequestBodySize
	expect := req.ContentLength
	if enc := req.Header.Get("Content-Encoding"); expect >= 0 && enc != "" && enc != "identity" {
		expect *= 10
	}
	if expect < 0 || limit > 0 && expect > limit {
		expect = limit
	}
	charge := t.reading
	lb, _ := req.Body.(*limitedBody)
	if lb != nil {
		// The rate the body must keep arriving at grows with what it holds.
		charge = func(n int64) error {
			err := t.reading(n)
			if err == nil {
				lb.held.Store(n)
			}
			return err
		}
	}
	body, err := readAll(req.Body, expect, charge)
	_ = req.Body.Close()
	if err != nil {
		var tooLarge *http.MaxBytesError
		var netErr net.Error
		switch {
		case errors.Is(err, errNoRoom), errors.Is(err, errTenantNoRoom):
			return nil, r.busy(err)
		case errors.As(err, &tooLarge):
			return nil, apierror.New(http.StatusRequestEntityTooLarge, apierror.PayloadTooLarge,
				fmt.Sprintf("the body is larger than %d bytes; send smaller requests", tooLarge.Limit))
		case errors.Is(err, errBodyTooSlow) && lb != nil:
			return nil, apierror.New(http.StatusRequestTimeout, apierror.InvalidBody,
				fmt.Sprintf("the body arrived at less than the %d bytes a second it had to over %s (min_body_rate, or the %d bytes it held over body_hold_window, %s); nothing was stored: send it faster, or in smaller requests",
					lb.required.Load(), bodyRateWindow, lb.held.Load(), r.cfg.BodyHoldWindow))
		case errors.As(err, &netErr) && netErr.Timeout():
			return nil, apierror.New(http.StatusRequestTimeout, apierror.InvalidBody,
				fmt.Sprintf("the body did not arrive within %s of the headers (read_body_timeout); nothing was stored: send it faster, or in smaller requests", r.cfg.ReadBodyTimeout))
		}
		return nil, apierror.New(http.StatusBadRequest, apierror.InvalidBody, "the body could not be read: "+err.Error())
	}
	return body, nil
}

// A body must keep arriving at a rate: after bodyRateGrace (for the connection's first
// round trips, and a 100-continue's), the bytes of the last bodyRateWindow, checked every
// bodyRateCheck, must come to min_body_rate a second, or to what the body holds divided
// by body_hold_window if that is more. read_body_timeout alone let a client send most of
// a 10 MiB body at once and trickle the rest, holding its buffer for the whole timeout;
// a fixed rate only made the trickle 64 KiB/s, and twelve connections of four accounts
// still held the whole budget for 15 s per burst. Making the rate grow with what is held
// makes holding memory cost the sender bandwidth in proportion (10 MiB for 10 s takes
// sending 10 MiB more), so a trickle behind a burst is ended within a window.
//
// A body is held to a rate only once it holds more than its first buffer (firstChunk):
// a small body costs little however slowly it arrives, and a device on a slow link
// would otherwise fail every time (OTLP exporters do not retry 408), so it is bounded by
// read_body_timeout alone. The window is a few seconds so that a pause of a congested
// network is not refused, while a trickle is.
const (
	bodyRateGrace  = time.Second
	bodyRateWindow = 3 * time.Second
	bodyRateCheck  = 250 * time.Millisecond
)

// errBodyTooSlow is a body read stopped for arriving under min_body_rate.
var errBodyTooSlow = errors.New("the body arrived under min_body_rate")

// bodyLimits gives each request's body read_body_timeout to arrive, from when its
// headers have, and holds it to min_body_rate. The deadline is lifted once the body is
// read (closed): net/http keeps reading the connection in the background while a handler
// works, and a deadline passing then would cancel the request's context half way through
// storing it.
func (r *ingestReceiver) bodyLimits(next http.Handler) http.Handler {
	if r.cfg.ReadBodyTimeout <= 0 && r.cfg.MinBodyRate <= 0 && r.cfg.BodyHoldWindow <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Body != nil && req.Body != http.NoBody {
			rc := http.NewResponseController(w)
			var err error
			if r.cfg.ReadBodyTimeout > 0 {
				err = rc.SetReadDeadline(time.Now().Add(r.cfg.ReadBodyTimeout))
			}
			// Without read deadlines (a transport that has none) neither bound can be held.
			if err == nil {
				b := &limitedBody{ReadCloser: req.Body, rc: rc, minRate: r.cfg.MinBodyRate, holdWindow: r.cfg.BodyHoldWindow}
				// A handler that returns without closing the body leaves no check running
				// to set a deadline on the connection's next request.
				defer b.stop()
				req.Body = b
			}
		}
		next.ServeHTTP(w, req)
	})
}

// limitedBody counts what arrives and, while it is read, checks the rate every
// bodyRateCheck; a body under its rate has its read deadline moved to now, which ends
// the read waiting for it.
type limitedBody struct {
	io.ReadCloser
	rc         *http.ResponseController
	minRate    int64
	holdWindow time.Duration
	n          atomic.Int64
	held       atomic.Int64 // the buffer readBody holds the body in; 0 when not read by it
	required   atomic.Int64 // the rate it was held to when it was too slow

	mu      sync.Mutex
	timer   *time.Timer // nil until the first read
	start   time.Time
	stopped bool
	tooSlow bool
	samples []rateSample // oldest first: the base of the window, then one per check
}

type rateSample struct {
	at time.Time
	n  int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.minRate > 0 || b.holdWindow > 0 {
		b.mu.Lock()
		// The clock starts at the first read: net/http sends a 100-continue only then.
		if b.timer == nil && !b.stopped {
			b.start = time.Now()
			b.samples = []rateSample{{at: b.start}}
			b.timer = time.AfterFunc(bodyRateCheck, b.check)
		}
		b.mu.Unlock()
	}
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	if err != nil && err != io.EOF {
		b.mu.Lock()
		slow := b.tooSlow
		b.mu.Unlock()
		if slow {
			return n, errBodyTooSlow
		}
	}
	return n, err
}

func (b *limitedBody) check() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	now := time.Now()
	b.samples = append(b.samples, rateSample{at: now, n: b.n.Load()})
	// The base is the newest sample at least a window old (or the start).
	for len(b.samples) > 1 && !b.samples[1].at.After(now.Add(-bodyRateWindow)) {
		b.samples = b.samples[1:]
	}
	if rate := b.rate(); rate > 0 && now.Sub(b.start) >= bodyRateGrace {
		if base := b.samples[0]; float64(b.n.Load()-base.n) < float64(rate)*now.Sub(base.at).Seconds() {
			b.tooSlow = true
			b.required.Store(rate)
			_ = b.rc.SetReadDeadline(now) // the read waiting for the body returns a timeout
			return
		}
	}
	b.timer.Reset(bodyRateCheck)
}

// rate is the bytes a second the body must arrive at now: none while it holds no more
// than its first buffer, else min_body_rate or what it holds over body_hold_window,
// whichever is more.
func (b *limitedBody) rate() int64 {
	held := b.held.Load()
	if held <= firstChunk {
		return 0
	}
	rate := b.minRate
	if b.holdWindow > 0 {
		rate = max(rate, int64(float64(held)/b.holdWindow.Seconds()))
	}
	return rate
}

// stop ends the checks; the body's deadline is lifted with it.
func (b *limitedBody) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	b.stopped = true
	if b.timer != nil {
		b.timer.Stop()
	}
	_ = b.rc.SetReadDeadline(time.Time{})
}

func (b *limitedBody) Close() error {
	b.stop()
	return b.ReadCloser.Close()
}

// firstChunk is what reading a body starts with: most bodies fit, and a slow sender
// holds no more than this until its bytes arrive.
const firstChunk = 64 << 10

// readAll reads rd into a buffer that grows as bytes arrive, each growth charged first
// (charge gets the buffer's new capacity; its error stops the read). It doubles up to
// hint, then allocates exactly hint (+1 to read EOF without growing), so a body of the
// announced size leaves at most its size in smaller buffers behind, where io.ReadAll
// leaves several times it.
func readAll(rd io.Reader, hint int64, charge func(int64) error) ([]byte, error) {
	size := int64(firstChunk)
	if hint > 0 && hint+1 < size {
		size = hint + 1
	}
	if err := charge(size); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, size)
	for {
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) < cap(buf) {
			continue
		}
		next := 2 * int64(cap(buf))
		if hint > int64(len(buf)) && next > hint+1 {
			next = hint + 1
		}
		if err := charge(next); err != nil {
			return nil, err
		}
		grown := make([]byte, len(buf), next)
		copy(grown, buf)
		buf = grown
	}
}

// perAccount is max_inflight_bytes_per_account. Unless set, it is a quarter of
// max_inflight_bytes, or two bodies at max_request_body_size if that is more (bounded by
// max_inflight_bytes), so that an account can always have two requests at the body
// limit in flight. It counts body bytes (see admission): with the defaults an account's
// 32 MiB take three requests at the body limit at once, or hundreds of ordinary ones,
// while three quarters stay for everyone else.
func perAccount(cfg *Config) int64 {
	if cfg.MaxInflightBytesPerAccount > 0 {
		return cfg.MaxInflightBytesPerAccount
	}
	share := cfg.MaxInflightBytes / 4
	if cfg.MaxRequestBodySize > 0 {
		share = max(share, 2*cfg.MaxRequestBodySize)
	}
	return min(share, cfg.MaxInflightBytes)
}
