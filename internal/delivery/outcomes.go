package delivery

// Outcomes, the values of the exporters' "outcome" attributes (their documentation.md).
const (
	OutcomeDelivered    = "delivered"
	OutcomeDeadLettered = "dead_lettered"
	// OutcomeSkipped: the result's destination was removed or disabled meanwhile.
	OutcomeSkipped   = "skipped"
	AttemptOK        = "ok"
	AttemptRetryable = "retryable"
	AttemptFinal     = "final"
)
