// Package usage meters accepted records per account and calendar month (UTC) for the
// free tier, exactly and durably, shared by every receiver process, and keeps the
// per-day counts, the 80%/100% notices and the per-account limits the usage API and
// `accounts set-limit` need. It also holds the per-project ingest rate limiter.
//
// It imports no collector package: the control plane imports it (Reader, Limits), and
// its binary must carry no collector code. TestNoCollectorDependency keeps it so.
//
// # Why JetStream KV
//
// The stack already runs JetStream, replicated in the distributed shape, and every
// receiver is connected to it; Redis is optional. A KV bucket gives durable state and
// compare-and-set (kv.Update with the last revision), which is all an exact shared
// counter needs; a create (kv.Create) decides who sends a notice, and a state on the same
// key lets another process send it when its sender died (noticedelivery.go); a watch carries
// limit changes to every process in milliseconds. A JetStream counter stream (Nats-Incr)
// adds without a condition, so a request could only be checked after it was counted,
// and undoing an overshoot makes other processes refuse requests that fit.
//
// # Leases, and exactness
//
// One KV round-trip per request costs a contended compare-and-set (hundreds of µs) on the
// ingest path, so a meter takes a lease: in the same compare-and-set that counts a request
// it sets aside records for its next requests, which it then accepts from memory. A lease
// is recorded in the month's value under the meter's id, so what is free is always
// limit − claimed − Σ leases, and no two processes can hand out the same record: the
// count never passes the limit (a request is accepted only if all its records fit).
// Leases follow the account's rate (doubling while used up within their TTL, 250 ms) and
// are at most 1/16 of what is left, so they shrink near the limit and stop when under
// 16 records: the last few hundred records of a quota are counted request by request.
//
// Under-acceptance is the other risk: quota stranded in one process's lease while another
// refuses. A lease ends after its TTL; its holder settles it (adds what it used to
// claimed, frees the rest) at once when it needs a new one, and in the background
// otherwise. A meter about to refuse while other processes hold live leases that could
// make the request fit waits for them (up to two TTLs, backing off) and decides again. So a refusal means the records did
// not fit in what no lease holds. TestThreeMetersStopAtTheLimit (three meters, 10,050
// records in requests of 50 and 1) ends at exactly 10,000; TestIdleLeaseIsNotStranded
// fails without the wait.
//
// A process killed with a lease never under-counts: its lease stays counted, and ten TTLs
// after its end another meter folds it into claimed as fully used. The over-count is
// bounded by that lease (its traffic of a TTL or two, at most 1/16 of what was left).
//
// # Wiring (receiver)
//
//	m, _ := usage.Open(ctx, js, usage.Config{DefaultLimit: freeTierEvents, OnNotice: tellSinks})
//	defer m.Close(ctx)
//	r, err := m.Reserve(ctx, principal.AccountID, principal.ProjectID, records)
//	var qe *usage.QuotaError
//	if errors.As(err, &qe) { /* 429 quota_exceeded, Retry-After: qe.RetryAfter(), message qe.Error() */ }
//	if err != nil { /* NATS unreachable: storing would fail too; answer 503 */ }
//	if storeErr := store(); storeErr != nil { r.Refund(ctx) } else { r.Commit() }
//
// Reservation.Remaining feeds a RateLimit-Remaining header. Control plane: OpenReader
// (usage API; Limits for set-limit and list).
package usage
