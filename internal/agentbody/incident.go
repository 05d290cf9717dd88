package agentbody

import (
	"encoding/json"
	"strconv"
)

// IncidentCall is an incident-mode body:
//
//	{"incident": <incident>, "reason": "opened"|"updated"|"resolved"|"reinvestigate",
//	 "events": [<new events, oldest first>], "events_left_out": N, "window": [<context>]}
//
// with "events_left_out" (new events the call leaves out, past the most one call
// carries) only when not zero. incident is the incident's JSON object as its caller
// encoded it (anything else goes as null); events and window are records as stored or transformed, inserted as they are, the
// window already cut to the project's budget (FitWindow). A record that is not JSON
// (a record stored undecoded) goes as a JSON string, so the body always is JSON.
func IncidentCall(incident []byte, reason string, events [][]byte, leftOut int, window [][]byte) []byte {
	n := len(incident) + len(reason) + 96
	for _, e := range events {
		n += len(e) + 1
	}
	for _, w := range window {
		n += len(w) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"incident":`...)
	if isObject(incident) {
		b = append(b, incident...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"reason":`...)
	b = appendString(b, reason)
	b = append(b, `,"events":`...)
	b = appendRecords(b, events)
	if leftOut > 0 {
		b = append(b, `,"events_left_out":`...)
		b = strconv.AppendInt(b, int64(leftOut), 10)
	}
	b = append(b, `,"window":`...)
	b = appendRecords(b, window)
	return append(b, '}')
}

// isObject: the incident is the caller's encoding of a struct; anything else would
// make a body of another shape, so it goes as null.
func isObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return json.Valid(b)
		}
		return false
	}
	return false
}

func appendRecords(b []byte, recs [][]byte) []byte {
	b = append(b, '[')
	for i, r := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		if json.Valid(r) {
			b = append(b, r...)
		} else {
			b = appendString(b, string(r))
		}
	}
	return append(b, ']')
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // strings always marshal; invalid UTF-8 becomes U+FFFD
	return append(b, q...)
}
