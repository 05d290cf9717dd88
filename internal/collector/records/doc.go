// Package records turns OTLP pdata into flat records: one JSON object per log
// record, span or metric data point, published one per NATS message.
//
// The flat record exists so that users write triggers against a single, stable
// shape whatever the source: they never need to know how OTLP nests resources,
// scopes and records, nor which exporter produced the data. Its field names and
// types are an external contract; change them only with a contract change.
//
// Conventions:
//   - Every record starts with resourceAttributes and scope ({"name"}, plus
//     "version" when non-empty), copied into each record so it stands alone.
//   - Attribute maps are JSON objects in the producer's key order. Ints keep full
//     int64 precision; doubles use the shortest form that round-trips; NaN and
//     ±Inf, which JSON numbers cannot hold, become "NaN", "Infinity",
//     "-Infinity"; bytes are standard base64 strings; empty values are null.
//   - A log body is always a string: a bytes body is its base64 text, any other
//     non-string body its JSON text.
//   - Trace and span IDs are lowercase hex, "" when absent.
//   - Timestamps are quoted RFC 3339 UTC strings with exactly nine fractional
//     digits. A log record with neither time nor observed time takes the time
//     it was received; a metric point with no start time has startTimestamp "".
//   - Fields added after the first contract (log eventName; span traceState,
//     links and timestamp; point exemplars) come after the original ones and
//     are always present ("" or [] when the producer sent none), so the key
//     order of existing fields never changes.
//   - A span's timestamp equals its startTime, so every signal sorts on one key.
//   - Strings are always valid UTF-8 (invalid bytes become U+FFFD), and nothing
//     is HTML-escaped.
//
// JSON is written by hand into byte slices because this is the hot path of the
// collector (well over 100k records/s on one core); encoding/json via
// map[string]any costs several allocations per field.
package records
