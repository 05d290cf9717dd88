// Package pipelinectx holds every value our components pass each other through a
// pipeline call's context.Context, in one place. The collector hands a pipeline's data
// from component to component as pdata; what is not data (facts about the request, a
// signal between stages, a record of what became of each record) travels in the context
// of the same synchronous call. Each channel below needs that call unbroken from its
// writer to its reader: no asynchronous processor (batch) between them, which
// internal/collector/pipelinecheck refuses at `validate` and at start.
//
//	channel       written by                          read by                              role
//	Ingest        ingest receiver (per request)       jetstream exporter, which fills      ingest
//	 (+ Quota)                                         Quota for the receiver's answer
//	Throttled     jetstream exporter (as the error)   ingest receiver (429/422 answers)    ingest
//	Handoff       jetstream receiver (WithHandoff)    agent exporter signals (Handoff)     pipeline
//	Passes        trigger/window processors           agent exporter gives refused         pipeline
//	              (WithPasses, Took)                  calls' cooldowns back (GiveBack)
//	Outcome       jetstream receiver (WithOutcome,    processors and the agent exporter    pipeline
//	              raw stream, ledger on)              fill it; the receiver settles it
//
// The authenticated project travels beside these, in the collector's client.Info
// (internal/collector/principal), which the same rule protects. docs/design.md#context-channels
// has the table with the reasons.
//
// Why the context and not attributes on the records: an attribute would reach the
// components from any OTLP client too, and one that set them could name another project,
// make the exporter publish arbitrary bytes, or settle deliveries it never made.
package pipelinectx
