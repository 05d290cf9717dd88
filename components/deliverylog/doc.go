// Package deliverylog stores the delivery log (one record per agent call or sink
// delivery, with its attempt log and bounded bodies) and the ledger counters of each
// project in JetStream (issue 15, contract section 11).
//
// Storage: ONE shared stream, svc-deliveries, subjects svc-deliveries.<project>.<id>,
// MaxMsgsPerSubject=1 so each delivery keeps only its latest state (a rollup per
// subject), MaxAge 7 days. One stream rather than one per project because nats-server
// checks every new stream's subjects against every other stream's (the README's "Many
// tenants on one NATS server"): a third stream per project at 10,000 projects would make
// stream creation quadratic. The stream-wide MaxBytes (discard old) bounds the whole
// log, and each delivery's size is bounded (bodies capped, attempt log capped), so
// rewriting a delivery never grows the stream. nats-server has no byte limit per subject
// filter, so a per-project byte bound is NOT enforced yet: a project writing very many
// distinct deliveries can push the shared MaxBytes and make old deliveries of others
// expire early. The README's "Left" section says how to close that.
//
// Hot path: Writer.Record/Attempt/Finish never wait on NATS. They put an event on a
// bounded channel; when it is full the event is dropped and Dropped() counts it. The
// delivery itself is never slowed or lost, only its log detail. Bodies are capped
// (request MaxRequestBody, answer MaxAnswer) with a truncated flag.
//
// Ledger: counters per project in a KV bucket (svc-ledger), incremented in memory and
// flushed once a second per process with compare-and-set, so two processes add up
// exactly.
package deliverylog
