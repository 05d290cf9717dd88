package triggerprocessor

import (
	"errors"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/ottlevent"
)

// isTooLarge reports whether a transform (not the trigger, whose failure only means no
// match) grew the record past the record limit.
func isTooLarge(err error) bool {
	var ee *ottlevent.EvalError
	return errors.As(err, &ee) && errors.Is(err, ottlevent.ErrRecordTooLarge)
}

// TooLargeReason is the error a record too large after transforms shows as its
// delivery's error: the contract's code, then which statement and by how much.
func TooLargeReason(err error) string {
	return apierror.RecordTooLargeAfterTransforms + ": " + err.Error()
}
