package records

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TooLargeError says that one record of a request is larger than a record may be (one
// record is one NATS message, and a message has a size limit). Retrying cannot help, so
// the request is refused whole, before anything of it is stored.
type TooLargeError struct {
	Index int // the record's position in the request, from 0; -1 when unknown
	Size  int // its size in bytes, as it would be stored
	Limit int // the largest record allowed, in bytes
}

func (e *TooLargeError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("a record of the request is over the limit of %d bytes per record; split the record or shorten its fields", e.Limit)
	}
	return fmt.Sprintf("record %d of the request is %d bytes, over the limit of %d bytes per record; split the record or shorten its fields",
		e.Index, e.Size, e.Limit)
}

// GRPCStatus makes the stock otlpreceiver answer gRPC clients InvalidArgument, OTLP's
// non-retryable answer for data that can never be accepted; without it a permanent error
// becomes Internal there.
func (e *TooLargeError) GRPCStatus() *status.Status {
	return status.New(codes.InvalidArgument, e.Error())
}
