package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
)

// GET /console/v1/projects/{project_id}/trace?seq=N (a record of the raw stream) or
// ?request_id=req_... (an agent call's X-Request-Id): the record, the call that carried
// it, the results the agent posted for that call and each destination's delivery of them
// (deliverylog.Trace).

const msgTraceNotFound = "nothing to trace: no such record or agent call in this project (records and deliveries are kept for a limited time)"

// traceQuery is what a trace starts from: exactly one of seq and requestID.
type traceQuery struct {
	seq       uint64
	requestID string
}

// requestIDRE is the shape of a delivery id, which an agent call's request id is.
var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

const msgTraceQuery = "give either seq (a raw stream sequence, a whole number from 1) or request_id (an agent call's X-Request-Id), once"

// parseTraceQuery reads ?seq= or ?request_id=.
func parseTraceQuery(q url.Values) (traceQuery, error) {
	var t traceQuery
	seqs, ids := q["seq"], q["request_id"]
	if len(seqs)+len(ids) != 1 {
		return t, errors.New(msgTraceQuery)
	}
	if len(seqs) == 1 {
		n, err := strconv.ParseUint(seqs[0], 10, 64)
		if err != nil || n == 0 {
			return t, errors.New("seq must be a raw stream sequence, a whole number from 1")
		}
		t.seq = n
		return t, nil
	}
	if !requestIDRE.MatchString(ids[0]) {
		return t, errors.New("request_id must be an agent call's X-Request-Id: 1 to 128 letters, digits, '-' or '_'")
	}
	t.requestID = ids[0]
	return t, nil
}

func traceEndpoint() endpoint {
	return endpoint{name: "trace", parse: query(func(q url.Values) (readFunc, *apierror.Error) {
		tq, err := parseTraceQuery(q)
		if err != nil {
			return nil, apierror.New(http.StatusBadRequest, apierror.InvalidBody, err.Error())
		}
		return func(ctx context.Context, js jetstream.JetStream, projectID string) (any, error) {
			r, err := reader(ctx, js)
			if r == nil {
				// Nothing was ever logged: no call to follow a record to.
				if err == nil {
					err = apierror.New(http.StatusNotFound, apierror.NotFound, msgTraceNotFound)
				}
				return nil, err
			}
			var t deliverylog.Trace
			if tq.requestID != "" {
				t, err = r.TraceRequest(ctx, js, projectID, tq.requestID)
			} else {
				t, err = r.TraceSeq(ctx, js, projectID, tq.seq)
			}
			if errors.Is(err, deliverylog.ErrNotFound) || errors.Is(err, deliverylog.ErrInvalidID) {
				return nil, apierror.New(http.StatusNotFound, apierror.NotFound, msgTraceNotFound)
			}
			if err != nil {
				return nil, err
			}
			return t, nil
		}, nil
	})}
}
