// Package otlphttp is what the OTLP/HTTP specification fixes about the ingest receiver's
// answers: the two body encodings, and errors as a google.rpc.Status in the request's
// encoding with the status mapped as the collector's otlpreceiver maps it (its
// internal/errors). Hand-written because otlpreceiver keeps these internal.
package otlphttp

import (
	"net/http"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

// The media types of the two OTLP/HTTP encodings.
const (
	ProtobufContentType = "application/x-protobuf"
	JSONContentType     = "application/json"
)

// Encoding is the body encoding of an OTLP/HTTP request; answers use the same one.
type Encoding struct{ JSON bool }

// ContentType is the encoding's media type.
func (e Encoding) ContentType() string {
	if e.JSON {
		return JSONContentType
	}
	return ProtobufContentType
}

// ForMediaType returns the encoding of a request's media type (lowercase, without
// parameters), and false when it is neither: errors are then answered in JSON.
func ForMediaType(mt string) (Encoding, bool) {
	switch mt {
	case ProtobufContentType:
		return Encoding{}, true
	case JSONContentType:
		return Encoding{JSON: true}, true
	}
	return Encoding{JSON: true}, false
}

// WriteError answers as the OTLP/HTTP specification asks: a google.rpc.Status in the
// request's encoding, with Retry-After on 429 and 503.
func WriteError(w http.ResponseWriter, enc Encoding, e *apierror.Error) {
	st := &spb.Status{Code: int32(grpcCode(e.Status)), Message: e.Message}
	var body []byte
	var err error
	if enc.JSON {
		body, err = protojson.Marshal(st)
	} else {
		body, err = proto.Marshal(st)
	}
	if err != nil {
		http.Error(w, e.Message, e.Status)
		return
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", apierror.RetryAfterSeconds(e.RetryAfter))
	}
	w.Header().Set("Content-Type", enc.ContentType())
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// grpcCode maps as the collector's otlpreceiver does.
func grpcCode(status int) codes.Code {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return codes.Unimplemented
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return codes.Unavailable
	}
	return codes.Unknown
}
