package console

import (
	"encoding/json"
	"time"
)

// The matched records of a dry run, as stored and as the agent would get them, so the
// dashboard can show every match of the run, not only those a separate events read
// still reaches.

// maxDryRunRecordBytes bounds the records of an answer, as maxDryRunCallBytes bounds
// its calls: a budget of its own, so a run with many large matches still shows its calls.
const maxDryRunRecordBytes = maxDryRunCallBytes

// dryRunRecord is a matched record: Record as stored, Transformed as the agent would get
// it (legacy mode: after the transforms; window mode: the call's trigger).
type dryRunRecord struct {
	Seq         uint64          `json:"seq"`
	Time        string          `json:"time"`
	Signal      string          `json:"signal"`
	SourceID    string          `json:"source_id,omitempty"`
	Record      json.RawMessage `json:"record"`
	Transformed json.RawMessage `json:"transformed"`
}

// matchedRecord adds a matched record to the answer within the records' byte budget.
// Once one is left out so are all later ones: the listed records are always the first
// of matched_seqs, in order.
func (d *dryRun) matchedRecord(r storedRecord, transformed []byte) {
	stored, sent := jsonOrString(r.data), jsonOrString(transformed)
	n := len(stored) + len(sent)
	if d.recordBytes+n > d.lim.recordBytes {
		d.ans.RecordsLeftOut++
		d.recordBytes = d.lim.recordBytes
		return
	}
	d.recordBytes += n
	d.ans.Records = append(d.ans.Records, dryRunRecord{Seq: r.seq, Time: r.time.UTC().Format(time.RFC3339Nano),
		Signal: r.signal, SourceID: r.sourceID, Record: stored, Transformed: sent})
}

// jsonOrString keeps JSON as it is and shows anything else (a record stored undecoded
// that is not JSON) as a JSON string, so the answer stays JSON.
func jsonOrString(b []byte) json.RawMessage {
	if json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}
