package incident

import (
	"slices"
	"time"
)

// Bounds of what an incident remembers of the stream sequences it counted.
const (
	// countedFor is how long counted sequences are remembered: a batch comes again after
	// its process died (AckWait, a minute) or failed, and a backlog behind a storm can
	// take minutes more; ten covers several redeliveries of the same batch.
	countedFor = 10 * time.Minute
	// maxCounted bounds the ranges kept; past it the lowest (oldest) ranges go. Merging
	// ranges instead would cover sequences never counted (a killed process's un-acked
	// batch), whose redelivery would then count nothing: a batch older than the kept
	// ranges, delivered again, counts twice instead, which is seen, not lost.
	maxCounted = 256
)

// SeqRange is a run of stream sequences, Lo..Hi inclusive, counted into an incident; At
// (unix seconds) is when the last of them was.
type SeqRange struct {
	Lo uint64 `json:"lo"`
	Hi uint64 `json:"hi"`
	At int64  `json:"at"`
}

// sortedSeqs is seqs sorted, without repeats and zeros, in a new slice.
func sortedSeqs(seqs []uint64) []uint64 {
	out := make([]uint64, 0, len(seqs))
	for _, s := range seqs {
		if s != 0 {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// seen: seq is in one of the (sorted, disjoint) ranges.
func seen(rs []SeqRange, seq uint64) bool {
	i, _ := slices.BinarySearchFunc(rs, seq, func(r SeqRange, s uint64) int {
		switch {
		case r.Hi < s:
			return -1
		case r.Lo > s:
			return 1
		}
		return 0
	})
	return i < len(rs) && rs[i].Lo <= seq && seq <= rs[i].Hi
}

// unseen is the sorted seqs not in rs.
func unseen(rs []SeqRange, seqs []uint64) []uint64 {
	if len(rs) == 0 {
		return seqs
	}
	out := make([]uint64, 0, len(seqs))
	for _, s := range seqs {
		if !seen(rs, s) {
			out = append(out, s)
		}
	}
	return out
}

// count adds the sorted seqs to rs at now: ranges older than countedFor go, runs of
// consecutive sequences are one range, touching ranges merge, and past maxCounted the
// lowest ranges go. No range ever covers a sequence not counted.
func count(rs []SeqRange, seqs []uint64, now time.Time) []SeqRange {
	return countRuns(rs, seqs, nil, now)
}

// Runs are the maximal runs of consecutive sequences of sorted seqs: what a batch
// covers (Join.Covered).
func Runs(seqs []uint64) [][2]uint64 {
	var out [][2]uint64
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		out = append(out, [2]uint64{seqs[i], seqs[j]})
		i = j + 1
	}
	return out
}

// countRuns is count with covered runs added as well: every sequence of a run was in
// the batch and classified there, so none of them can come later as a new event of this
// fingerprint, and adjacent batches' runs merge into one range (a fingerprint's own
// events, spread over the stream, never would, and the ranges would fill up to
// maxCounted, which every Apply decodes and encodes again).
func countRuns(rs []SeqRange, seqs []uint64, covered [][2]uint64, now time.Time) []SeqRange {
	at := now.Unix()
	out := make([]SeqRange, 0, len(rs)+len(covered)+4)
	for _, r := range rs {
		if at-r.At < int64(countedFor/time.Second) {
			out = append(out, r)
		}
	}
	for _, run := range Runs(seqs) {
		out = append(out, SeqRange{Lo: run[0], Hi: run[1], At: at})
	}
	for _, run := range covered {
		if run[0] != 0 && run[0] <= run[1] {
			out = append(out, SeqRange{Lo: run[0], Hi: run[1], At: at})
		}
	}
	slices.SortFunc(out, func(a, b SeqRange) int {
		switch {
		case a.Lo < b.Lo:
			return -1
		case a.Lo > b.Lo:
			return 1
		}
		return 0
	})
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 && r.Lo <= merged[n-1].Hi+1 {
			last := &merged[n-1]
			last.Hi, last.At = max(last.Hi, r.Hi), max(last.At, r.At)
			continue
		}
		merged = append(merged, r)
	}
	if n := len(merged) - maxCounted; n > 0 {
		merged = merged[n:]
	}
	return slices.Clip(merged)
}
