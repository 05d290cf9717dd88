// Package deliverylog stores the delivery log (one record per agent call or sink
// delivery, with its attempt log and bounded bodies) and the ledger counters of each
// project in JetStream (docs/contract.md#section-11).
//
// Storage: ONE shared stream, svc-deliveries, subjects svc-deliveries.<project>.<id>,
// MaxMsgsPerSubject=1 so each delivery keeps only its latest state (a rollup per
// subject), MaxAge 7 days. One stream rather than one per project because nats-server
// checks every new stream's subjects against every other stream's (the README's "Many
// tenants on one NATS server"): a third stream per project at 10,000 projects would make
// stream creation quadratic. The stream-wide MaxBytes (discard old) bounds the whole
// log, and each delivery's size is bounded (bodies capped, attempt log capped), so
// rewriting a delivery never grows the stream. nats-server has no byte limit per subject
// filter, so the writer bounds each project's share itself once a minute: it purges a
// project's oldest deliveries beyond WriterConfig.MaxPerProject, or beyond what
// MaxBytesPerProject holds at the average size of the project's recent messages, and
// counts (RetentionCut) a stream found full of deliveries younger than their 7 days.
// Each message carries its filter fields in headers, so reads scan headers only.
//
// Hot path: Writer.Record/Attempt/Finish never wait on NATS. They put an event on a
// bounded channel; when it is full a record or attempt is dropped and Dropped() counts
// it, while a final event (finish, abandon, superseded) goes to a side queue (at most
// InFlight) the writer takes every round, so a logged delivery never stays retrying for
// want of its end. The delivery itself is never slowed or lost, only its log detail.
// Bodies are capped (request MaxRequestBody, answer MaxAnswer) with a truncated flag.
//
// Ledger: counters per project in a KV bucket (svc-ledger), every write a compare-and-set
// so processes add up exactly. The pipeline's counts (Settle) are written before a batch
// is acknowledged, with the raw sequences they cover, so a crash neither loses them nor
// counts a redelivered batch twice; received and pending are read from the raw stream and
// the pipeline's consumer when the ledger is viewed, so the equation is checked against
// the streams. Other counts (results, sink deliveries) are added in memory and flushed
// once a second.
//
// Replay: a queue (svc-replays, work queue) of jobs the console enqueues and the agent
// exporter runs (replay.go).
//
// Trace: from a raw record or an agent call to the results and sink deliveries that
// followed, by bounded scans of the log after it (trace.go).
package deliverylog
