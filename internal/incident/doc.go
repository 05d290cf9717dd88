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
//	<project>.k               the fingerprints the project keeps (hashes)
//
// fph is FingerprintHash: the fingerprint is a tenant's OTTL value of any length and
// alphabet, its hash a key-safe token of fixed size. One key per fingerprint makes every
// change a compare-and-set of that key alone (streams.UpdateKV): two pipeline processes
// counting the same fingerprint's events cannot both open an incident, a claim of a call
// is won by one ticker, and no change needs a lock spanning keys. Apply counts by stream
// sequence (Join.Seqs): the incident remembers the sequences it counted in the last ten
// minutes as ranges (at most 256, the lowest dropped past that: a batch older than all
// of them delivered again counts twice, none is lost; passed on to the next generation),
// so a batch
// delivered again, after any number of others or mixed with new records, counts only
// what it had not counted. Callers without sequences give a batch key instead (the
// incident remembers its last 64).
//
// Notices. A change's notices are written into the incident's outbox (its newest 32) in
// the same compare-and-set as the change, and returned. Whoever made the change
// publishes them (Publish) and then clears them (Published with MaxSeq of those it
// published); a process that dies, or a stream that is away, in between leaves them in
// the outbox, and the ticker, which watches every f-key, publishes again what has waited
// a few seconds (PendingNotices) and clears it. The output stream's message ids
// (Notice.MsgID) make a notice published twice stored once, and the sink updates a chat
// root that exists. An opening of a fingerprint's next generation returns the old one's
// unpublished notices with its own and keeps them in its outbox until published (no
// watcher reads archives); Published clears only the notices of the id it is given. The
// opening batch delivered again gives the opened notice again only while it is in the
// outbox: once published, a copy given past the output stream's duplicate window would
// be stored twice.
//
// Calls. A call the project's call budget refused (Complete with "refused") is no call:
// the opening, resolution, reinvestigation or events it was to tell stay to be told, and
// Due gives it again a minute later. The retry keeps the refused call's request id
// (RefusedRequestID; Claim returns it as Pending.RequestID) and its c-key, and the
// timeline keeps one entry for it counting the attempts: a budget spent for a day costs
// no key and no entry per attempt.
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
// stored, results 500 characters, the outbox 32 notices, counted sequences 256 ranges of
// the last ten minutes, and a project at most 500 open incidents. The open count is the
// n-key, read only when an incident opens or reopens (joining an open one, by far the
// common case, never reads it); past the limit, events of new fingerprints join the
// project's overflow incident. A project keeps at most 2,000 fingerprints (the k-key,
// read only by a fingerprint's first opening; WithMaxFingerprints), so incidents opened
// and resolved at ingest rate under ever new fingerprints end in the overflow incident
// too; a fingerprint keeps its newest 3 archives, each cut to its last 20 timeline
// entries (timeline_dropped counts the rest) without counted sequences, batch keys or
// outbox. List reads at most the 1,000
// incidents changed last. Every key expires 30 days after its last change, and the
// bucket holds at most DefaultMaxBytes (WithMaxBytes, from the component's
// configuration). Keys do not expire sooner by kind: a KV key's own TTL is set only when
// the key is created (jetstream.KeyTTL), not by the compare-and-set updates every
// change here is, so the counts above bound the bucket instead.
//
// Worst case per project, every cap reached (TestArchiveSizeBound): 2,000 f-keys of at
// most 256 KiB (the value size; ~240 KB with every text at its bound), 6,000 archives of
// at most ~37 KB (plain text at every bound; ~200 KB if every text is made of characters
// JSON writes as six bytes), the n- and k-keys (~120 KB), and a c-key (~300 bytes with
// its key) per call claimed: calls are bounded by the call budget (max_calls_per_day a
// day for 30 days), a refused call's retries reuse its c-key, and completed calls' c-keys
// stay for their results (ByRequest) until they expire. That is ~750 MB, ~1.7 GB with
// escaped texts: more than DefaultMaxBytes, so one tenant at every cap can still fill
// the bucket. A busy incident of events entries and counted ranges is ~22 KB, its
// archive ~2 KB.
//
// Watchers. Every pipeline process's ticker watches every f-key and sees every write:
// DueStateOf decodes only what DueOf reads (no timeline, chat threads, counted
// sequences or notice texts).
package incident
