package pipelinectx

import (
	"net/http"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Throttled is the exporter's refusal of a whole request over its account's monthly
// quota or its project's ingest rate, or (422, without RetryAfter) of a request whose
// Idempotency-Key came first with another request: nothing of it was stored. It is the other half of
// the coupling between the exporter and the receivers: the ingest receiver answers it
// with Status, Code and Retry-After; the stock OTLP/gRPC receiver passes GRPCStatus on
// (it uses status.FromError), which is RESOURCE_EXHAUSTED with a RetryInfo, the only
// form of it that OTLP clients retry, after the delay it gives.
type Throttled struct {
	// Status is the HTTP status (429; 413 for a request larger than the rate's burst,
	// which can never pass whole).
	Status int
	// Code is the contract's error code (apierror.QuotaExceeded, apierror.RateLimited).
	Code string
	// RetryAfter is when the same request could pass (0 with 413).
	RetryAfter time.Duration
	// Err says what limit was hit, for the person reading the answer; for the quota it
	// is a *usage.QuotaError.
	Err error
}

func (t *Throttled) Error() string { return t.Err.Error() }

// Unwrap lets errors.As find the cause (*usage.QuotaError).
func (t *Throttled) Unwrap() error { return t.Err }

// GRPCStatus is what the OTLP/gRPC receiver answers.
func (t *Throttled) GRPCStatus() *status.Status {
	if t.Status != http.StatusTooManyRequests {
		return status.New(codes.InvalidArgument, t.Err.Error())
	}
	st := status.New(codes.ResourceExhausted, t.Err.Error())
	if t.RetryAfter > 0 {
		// Whole seconds rounded up, as the Retry-After of the HTTP answer.
		d := max((t.RetryAfter+time.Second-1)/time.Second*time.Second, time.Second)
		if withInfo, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)}); err == nil {
			st = withInfo
		}
	}
	return st
}
