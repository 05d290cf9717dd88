package deliverylog

import (
	"sync"
)

// Outcome is what the agent exporter did with one pipeline batch's records, told to the
// JetStream receiver that settles the batch (Ledger.Settle) before acknowledging it. The
// receiver puts it in the batch's context; the processors in between pass the context on.
// Processors and exporters stay decoupled: a pipeline without the agent exporter leaves it
// empty, and every record counts as dropped.
type Outcome struct {
	mu      sync.Mutex
	records map[uint64]byte
	n, ndl  int
	// opened counts the incidents the batch's events opened (incident mode).
	opened int
}

const (
	outcomeDropped byte = iota
	outcomeSent
	outcomeDeadLettered
	outcomeSuppressed
	outcomeIncident
)

// NewOutcome returns an empty outcome.
func NewOutcome() *Outcome { return &Outcome{records: map[uint64]byte{}} }

// Call records one agent call carrying the records of raw sequences seqs.
func (o *Outcome) Call(seqs []uint64, deadLettered bool) {
	if o == nil {
		return
	}
	v := outcomeSent
	if deadLettered {
		v = outcomeDeadLettered
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range seqs {
		o.records[s] = v
	}
	if deadLettered {
		o.ndl++
	} else {
		o.n++
	}
}

// Suppressed records the records of raw sequences seqs as held back by a guardrail (a
// cooldown, a call budget): they count as dropped, and as suppressed, so an owner sees
// what was not sent and why. A later Call for the same sequence wins.
func (o *Outcome) Suppressed(seqs []uint64) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range seqs {
		if o.records[s] == outcomeDropped {
			o.records[s] = outcomeSuppressed
		}
	}
}

// Incident records the records of raw sequences seqs as events that joined an incident
// (incident mode): no call carries them, the incident's later calls do, so they count
// apart from dropped, in incident_events. opened is how many incidents they opened.
func (o *Outcome) Incident(seqs []uint64, opened int) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range seqs {
		o.records[s] = outcomeIncident
	}
	o.opened += opened
}

// Calls returns the calls recorded as delivered and as dead-lettered: the incident
// processor reads how its own call ended (none of either: the call budget refused it).
func (o *Outcome) Calls() (delivered, deadLettered int) { return o.calls() }

func (o *Outcome) outcome(seq uint64) byte {
	if o == nil {
		return outcomeDropped
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.records[seq]
}

// incidentsOpened returns how many incidents the batch opened.
func (o *Outcome) incidentsOpened() int {
	if o == nil {
		return 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.opened
}

// calls returns the calls delivered and dead-lettered.
func (o *Outcome) calls() (int, int) {
	if o == nil {
		return 0, 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n, o.ndl
}
