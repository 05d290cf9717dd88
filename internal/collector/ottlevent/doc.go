// Package ottlevent is the OTTL context `event`: triggers, transforms, context
// filters and group keys written over the flat record (docs/contract.md#section-4 and #section-6).
//
// # Why a context of its own
//
// Users write triggers against the fields they see in the console's Fields view,
// whatever the source: an OTLP log, a span, a metric point, an event posted to
// /v1/events or a push-source envelope. The collector's contexts (ottllog, ottlspan...)
// each follow one OTLP shape; the flat record is a single JSON object instead, so this
// context exposes exactly that object, and OTTL's parser and standard functions
// (ottlfuncs.StandardFuncs) do the rest. Only the paths are written here.
//
// # Paths
//
//   - `event` is the whole record; `event["field"]["nested"]` reaches anything,
//     whatever its name (camelCase, dots, a leading underscore).
//   - A bare lowercase name `x` is `event["x"]`: `body`, `status`,
//     `attributes["http.method"]`, `payload["order"]["id"]`. `event.x` is the same
//     path with the context named, as `log.body` is `body` in the log context.
//   - Aliases for the camelCase fields of a log record: `severity_number`,
//     `severity_text`, `resource_attributes`, `trace_id`, `span_id` mean
//     event["severityNumber"], event["severityText"], event["resourceAttributes"],
//     event["traceId"], event["spanId"]. When the record has no camelCase field but
//     has the snake_case one (an event sent with its own "trace_id"), the alias
//     reaches that one. Inside event["..."] names are taken literally.
//   - `signal` is read-only: log, span, metric, event or source. A statement that
//     writes to it does not compile. A record field named "signal" is event["signal"].
//   - Any other bare name is event["name"] too, including the ones OTTL's grammar
//     cannot read as a path (it takes only [a-z][a-z0-9_]*): camelCase such as
//     `traceId`, `severityNumber`, `durationMs`, and names with a leading underscore
//     such as `_event_type`. Such names are rewritten to event["name"] before OTTL
//     parses the expression (`event.traceId` too), because the contract's own group
//     key example is `traceId`; strings, function names and lambda parameters are
//     left alone, and error positions refer to the text as written.
//   - Nested fields are reached with keys, never with dots: `status.code` is refused
//     at compile time (write status["code"]), so that `log.body` copied from a
//     collector configuration fails loudly instead of silently never matching.
//   - The aliases, `signal` and `event` itself win over record fields of the same
//     name; event["signal"], event["event"], event["trace_id"] reach those fields.
//   - The SEVERITY_NUMBER_* enums of the log context are available.
//
// Reading never fails because of a record's shape: a missing field, a key into a
// scalar or an index past the end of a list reads as nil, so a trigger over mixed
// sources simply does not match the records that lack the field. Writing creates
// missing objects along the path (set(event["a"]["b"], 1) makes "a" an object) but
// refuses to replace an existing scalar or list on the way.
//
// # Examples
//
//	severity_number >= 17 and resource_attributes["service.name"] == "checkout"
//	event["_event_type"] == "payment.failed"      (or _event_type == ...)
//	status == "failed"
//	IsMatch(body, "time(d)? ?out") and Len(attributes) > 2
//	set(event["service"], resource_attributes["service.name"])
//	delete_key(event, "traceId")
//	keep_keys(event, ["a", "b"])
//	merge_maps(event, ParseJSON(body), "upsert") where signal == "log"
//	set(event["parsed"], ExtractPatterns(body, "id=(?P<id>\\d+)"))
//
// Group keys are value expressions, rendered as a string ("" when absent, JSON text
// for numbers, booleans, objects and lists): `traceId`,
// `resource_attributes["k8s.pod.name"]`, `Concat([name, status["code"]], "/")`.
//
// # Records
//
// DecodeRecord reads a flat record's JSON into a pcommon.Map (see it for the number
// rules); AppendJSON writes a changed record back in the same key order, with the
// conventions of package records. Changed says whether any statement wrote.
//
// # Errors
//
// Compile* return a *CompileError naming the statement's index and the position in
// the expression, with OTTL's parser message. At evaluation, an error concerns one
// record: Match returns false with it, Apply skips the failing statement, runs the
// rest and returns the failures as *EvalError, ValueExpr.String returns it; the
// caller reports it and goes on with the next record.
//
// # Limits
//
// A record has a size limit while it is evaluated (Record.SetMaxBytes; 0 is
// DefaultMaxRecordBytes, the receiver's SVC_MAX_RECORD_BYTES default): writes past it are
// refused, the record is measured after each statement that wrote, and converters fail
// when their result passes it (Concat and Format before building it, regex replacements
// before replacing). Apply stops at the first statement that passes the limit and returns
// a *TooLargeError (errors.Is ErrRecordTooLarge) in an *EvalError naming it; the caller
// must not send that record. Sizes are approximate JSON (see Record.Size). OTTL itself
// bounds nothing: contrib's transform processor runs its operator's statements, these
// are every project's own.
//
// # Functions
//
// Only reviewed OTTL standard functions are available (allowlist.go,
// allowedFunctions): those that make at most a constant factor of what they read, which
// the record limit then bounds. Refused when a statement is compiled (a save or a dry
// run answers 400 invalid_pipeline naming the function and why): InsertXML (inserts at
// every match: a record times its own size), GetXML (nested matches are written out
// once per ancestor: quadratic), and any function a contrib upgrade adds until it is
// reviewed. Allowed on conditions: ExtractGrokPatterns with a literal pattern of at most
// 1,024 bytes and 16 %{...} references and no pattern definitions (the library expands
// definitions in place: 16 nested levels made 150 MB while compiling);
// ConvertTextToElementsXML with an element name of at most 32 bytes; the replace
// functions with a replacement format that is a literal of at most 256 bytes (written
// around every replacement; counted before replacing); ToKeyValueString with delimiters
// of at most 16 bytes; flatten with a
// prefix of at most 64 bytes, failing a record whose flattened form would pass the
// record limit (keys are whole paths: quadratic in depth) or hold more than 2,000
// values (each insert looks the key up). set(x[i], v) fails, as too large, an index
// the record limit could not hold, before growing the list.
package ottlevent
