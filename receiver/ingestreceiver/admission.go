package ingestreceiver

import (
	"errors"
	"fmt"
	"io"
	"net/http"

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

// readBody reads the (already decompressed) body within the configured limit, after
// reserving what reading it will hold: the declared length; for a compressed body ten
// times that (OTLP compresses about that well); the body limit when the length is unknown.
// The caller corrects the reservation once the body is read.
func (r *ingestReceiver) readBody(req *http.Request, t *ticket) ([]byte, *apierror.Error) {
	limit := r.cfg.MaxRequestBodySize
	expect := req.ContentLength
	if enc := req.Header.Get("Content-Encoding"); expect >= 0 && enc != "" && enc != "identity" {
		expect *= 10
	}
	if expect < 0 || limit > 0 && expect > limit {
		expect = limit
	}
	if !t.reserve(expect) {
		_ = req.Body.Close()
		return nil, r.busy()
	}
	body, err := readAll(req.Body, expect)
	_ = req.Body.Close()
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, apierror.New(http.StatusRequestEntityTooLarge, apierror.PayloadTooLarge,
				fmt.Sprintf("the body is larger than %d bytes; send smaller requests", tooLarge.Limit))
		}
		return nil, apierror.New(http.StatusBadRequest, apierror.InvalidBody, "the body could not be read: "+err.Error())
	}
	return body, nil
}

// readAll is io.ReadAll with a size hint: a body read into a buffer grown by appending
// leaves copies of itself behind (several times the body of garbage for a 10 MB body),
// which io.ReadAll cannot be told to avoid.
func readAll(rd io.Reader, hint int64) ([]byte, error) {
	if hint <= 0 || hint > 64<<20 {
		return io.ReadAll(rd)
	}
	buf := make([]byte, 0, hint+1) // +1: reading EOF needs no growth
	for {
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // longer than hinted: grow as io.ReadAll would
		}
	}
}
