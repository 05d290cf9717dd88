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
	// maxCounted bounds the ranges kept; past it the two ranges with the smallest gap
	// between them become one.
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
// closest two merge. A merge may cover a sequence never counted: it would count as seen
// should it come later. The smallest gaps go first, those of a batch's records of other
// fingerprints, which never come as this fingerprint's events.
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
	for len(merged) > maxCounted {
		k := 0
		for i := 1; i+1 < len(merged); i++ {
			if merged[i+1].Lo-merged[i].Hi < merged[k+1].Lo-merged[k].Hi {
				k = i
			}
		}
		merged[k].Hi, merged[k].At = merged[k+1].Hi, max(merged[k].At, merged[k+1].At)
		merged = slices.Delete(merged, k+1, k+2)
	}
	return slices.Clip(merged)
}
