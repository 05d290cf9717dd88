package ingestreceiver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/otelcol-svc/otelcol-svc/components/apierror"
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
type admission struct {
	sem    *semaphore.Weighted
	budget int64
}

func newAdmission(budget int64) *admission {
	return &admission{sem: semaphore.NewWeighted(budget), budget: budget}
}

// ticket is what one request holds of the budget; release it when the request is done.
type ticket struct {
	a    *admission
	held int64
}

func (a *admission) ticket() *ticket { return &ticket{a: a} }

// reserve sets what the request holds to total bytes (a guess made before reading is
// corrected once the body is read, downwards too); false when the budget has no room now.
// A request alone may always have the whole budget, so one at the body limit is never
// refused forever.
func (t *ticket) reserve(total int64) bool {
	n := min(total, t.a.budget) - t.held
	if n < 0 {
		t.a.sem.Release(-n)
		t.held += n
		return true
	}
	if n == 0 {
		return true
	}
	if !t.a.sem.TryAcquire(n) {
		return false
	}
	t.held += n
	return true
}

func (t *ticket) release() {
	if t.held > 0 {
		t.a.sem.Release(t.held)
		t.held = 0
	}
}

// busy is the answer to a request the budget has no room for.
func (r *ingestReceiver) busy() *apierror.Error {
	e := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable,
		fmt.Sprintf("the receiver is already reading and decoding as many bytes as it may hold at once (max_inflight_bytes, %d MiB); retry in a few seconds", r.cfg.MaxInflightBytes>>20))
	e.RetryAfter = r.cfg.RetryAfter
	return e
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
	body, err := readAll(req.Body, expect, t.reserve)
	_ = req.Body.Close()
	if err != nil {
		var tooLarge *http.MaxBytesError
		var netErr net.Error
		switch {
		case errors.Is(err, errNoRoom):
			return nil, r.busy()
		case errors.As(err, &tooLarge):
			return nil, apierror.New(http.StatusRequestEntityTooLarge, apierror.PayloadTooLarge,
				fmt.Sprintf("the body is larger than %d bytes; send smaller requests", tooLarge.Limit))
		case errors.As(err, &netErr) && netErr.Timeout():
			return nil, apierror.New(http.StatusRequestTimeout, apierror.InvalidBody,
				fmt.Sprintf("the body did not arrive within %s of the headers (read_body_timeout); nothing was stored: send it faster, or in smaller requests", r.cfg.ReadBodyTimeout))
		}
		return nil, apierror.New(http.StatusBadRequest, apierror.InvalidBody, "the body could not be read: "+err.Error())
	}
	return body, nil
}

// bodyDeadline gives each request's body read_body_timeout to arrive, from when its
// headers have. The deadline is lifted once the body is read (closed): net/http keeps
// reading the connection in the background while a handler works, and a deadline
// passing then would cancel the request's context half way through storing it.
func (r *ingestReceiver) bodyDeadline(next http.Handler) http.Handler {
	if r.cfg.ReadBodyTimeout <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Body != nil && req.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if err := rc.SetReadDeadline(time.Now().Add(r.cfg.ReadBodyTimeout)); err == nil {
				req.Body = &deadlineBody{ReadCloser: req.Body, rc: rc}
			}
		}
		next.ServeHTTP(w, req)
	})
}

type deadlineBody struct {
	io.ReadCloser
	rc *http.ResponseController
}

func (b *deadlineBody) Close() error {
	_ = b.rc.SetReadDeadline(time.Time{})
	return b.ReadCloser.Close()
}

// errNoRoom is readAll's charge refused: the budget has no room for the body now.
var errNoRoom = errors.New("max_inflight_bytes has no room for the body")

// firstChunk is what reading a body starts with: most bodies fit, and a slow sender
// holds no more than this until its bytes arrive.
const firstChunk = 64 << 10

// readAll reads rd into a buffer that grows as bytes arrive, each growth charged first
// (charge gets the buffer's new capacity; false stops the read with errNoRoom). It
// doubles up to hint, then allocates exactly hint (+1 to read EOF without growing), so a
// body of the announced size leaves at most its size in smaller buffers behind, where
// io.ReadAll leaves several times it.
func readAll(rd io.Reader, hint int64, charge func(int64) bool) ([]byte, error) {
	size := int64(firstChunk)
	if hint > 0 && hint+1 < size {
		size = hint + 1
	}
	if !charge(size) {
		return nil, errNoRoom
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
		if !charge(next) {
			return nil, errNoRoom
		}
		grown := make([]byte, len(buf), next)
		copy(grown, buf)
		buf = grown
	}
}
