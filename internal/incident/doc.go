// Package incident keeps the incidents of incident-mode pipelines: events grouped by
// fingerprint into an incident that opens, is told to the agent (one opening call after
// group_wait, at most one update per group_interval, one when resolved), is acted on by
// people (acknowledge, resolve, mute, reinvestigate) and resolves by a resolve_when event
// or after resolve_after without events. It is collector-free: the incident processor,
// the sink, the receiver and the control plane all use it.
//
// State is one JetStream KV bucket, Bucket, shared by every process of every role:
//
//	<project>.f.<fph>         the fingerprint's current incident (JSON Incident)
//	<project>.r.<incident id> an archived incident
//	<project>.c.<request id>  {"incident_id", "reason"} of an agent call
//	<project>.n               the project's open slots (fingerprint hashes)
//
// fph is FingerprintHash: the fingerprint is a tenant's OTTL value of any length and
// alphabet, its hash a key-safe token of fixed size. One key per fingerprint makes every
// change a compare-and-set of that key alone (streams.UpdateKV): two pipeline processes
// counting the same fingerprint's events cannot both open an incident, a claim of a call
// is won by one ticker, and no change needs a lock spanning keys. Apply is idempotent per
// batch key (the incident remembers its last 64), so a redelivered batch is counted once.
//
// The incident id, inc_<fph>_<generation>, names its key: Get reads the f-key and, when
// that holds a later generation, the r-key. A fingerprint's next generation opens only
// after its incident resolved; the resolved one is Put to its r-key before the f-key is
// replaced, so its id keeps answering (results, chat buttons, links) for the bucket's max
// age.
//
// A result comes back to the receiver with nothing but its request id. The c-key, written
// when a call is claimed and before it is made, leads from it to the incident; request
// ids are not part of incident keys, so the one f-key per fingerprint stays the only thing
// that changes per event.
//
// Bounds (a free signup shares every process): the timeline keeps 200 entries (events
// entries within a minute merged), titles 200 characters, fingerprints 256 bytes as
// stored, results 500 characters, and a project at most 500 open incidents. The open
// count is the n-key, read only when an incident opens or reopens (joining an open one,
// by far the common case, never reads it); past the limit, events of new fingerprints
// join the project's overflow incident. Every key expires 30 days after its last change.
package incident
