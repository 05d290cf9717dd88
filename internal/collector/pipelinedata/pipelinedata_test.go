package pipelinedata

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/plog"
)

func TestAllWalksEveryResourceAndScopeInOrder(t *testing.T) {
	ld := plog.NewLogs()
	n := 0
	for range 2 {
		rl := ld.ResourceLogs().AppendEmpty()
		for range 2 {
			lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
			for range 2 {
				Append(lrs, Item{Body: []byte{byte('a' + n)}, Seq: uint64(n)})
				n++
			}
		}
	}
	var bodies string
	for lr := range All(ld) {
		bodies += string(Read(lr).Body)
	}
	assert.Equal(t, "abcdefgh", bodies)

	var first []uint64
	for lr := range All(ld) {
		first = append(first, Read(lr).Seq)
		if len(first) == 3 {
			break
		}
	}
	assert.Equal(t, []uint64{0, 1, 2}, first, "a break stops the walk")
}

func TestResultRoundTripKeepsItsCallAndUnmatchedMark(t *testing.T) {
	ld, lrs := New()
	Append(lrs, Item{Body: []byte(`{}`), Kind: KindResult, Seq: 7, SinkID: "s", RequestID: "req_1", MsgID: "m", Unmatched: true})
	Append(lrs, Item{Body: []byte(`{}`), Kind: KindResult, Seq: 8, SinkID: "s", RequestID: "req_2", MsgID: "n"})
	var got []Item
	for lr := range All(ld) {
		got = append(got, Read(lr))
	}
	assert.Equal(t, Item{Body: []byte(`{}`), Kind: KindResult, Seq: 7, SinkID: "s", RequestID: "req_1", MsgID: "m", Unmatched: true}, got[0])
	assert.False(t, got[1].Unmatched)
}

func TestSuppressedCountTravelsOnlyWhenSome(t *testing.T) {
	ld, lrs := New()
	Append(lrs, Item{Body: []byte(`{"a":1}`), Signal: "log", Seq: 1, Suppressed: 999})
	Append(lrs, Item{Body: []byte(`{"a":2}`), Signal: "log", Seq: 2})
	var got []Item
	for lr := range All(ld) {
		got = append(got, Read(lr))
	}
	assert.Equal(t, int64(999), got[0].Suppressed)
	assert.Zero(t, got[1].Suppressed)
	_, has := lrs.At(1).Attributes().Get(AttrSuppressed)
	assert.False(t, has, "records without a cooldown carry nothing new")

	SetSuppressed(lrs.At(1), 0)
	_, has = lrs.At(1).Attributes().Get(AttrSuppressed)
	assert.False(t, has)
	SetSuppressed(lrs.At(1), 3)
	assert.Equal(t, int64(3), Read(lrs.At(1)).Suppressed)
}

func TestGroupTravelsOnlyWhenSet(t *testing.T) {
	ld, lrs := New()
	Append(lrs, Item{Body: []byte(`{}`), Kind: KindWindowCall, Seq: 1, Group: "pod-a"})
	Append(lrs, Item{Body: []byte(`{}`), Kind: KindWindowCall, Seq: 2})
	var got []Item
	for lr := range All(ld) {
		got = append(got, Read(lr))
	}
	assert.Equal(t, "pod-a", got[0].Group)
	assert.Empty(t, got[1].Group)
	_, has := lrs.At(1).Attributes().Get(AttrGroup)
	assert.False(t, has, "the empty group adds nothing to the item")
}

func TestBodyIsSharedNotCopied(t *testing.T) {
	body := []byte(`{"severityNumber":17}`)
	ld, lrs := New()
	Append(lrs, Item{Body: body, Signal: "log", Seq: 1})
	var got []byte
	for lr := range All(ld) {
		got = Read(lr).Body
	}
	assert.Equal(t, body, got)
	assert.Same(t, &body[0], &got[0], "the batch reads the record where the message holds it, not a copy")

	changed := []byte(`{"a":2}`)
	SetBody(lrs.At(0), changed)
	assert.Same(t, &changed[0], &Read(lrs.At(0)).Body[0])
}

func TestBodyBuiltWithoutAppendStillReads(t *testing.T) {
	ld, lrs := New()
	lrs.AppendEmpty().Body().SetEmptyBytes().FromRaw([]byte(`{"a":1}`))
	lrs.AppendEmpty()
	var got [][]byte
	for lr := range All(ld) {
		got = append(got, Read(lr).Body)
	}
	assert.Equal(t, []byte(`{"a":1}`), got[0])
	assert.Empty(t, got[1])
}

func TestPlainRecordCarriesNoAttributes(t *testing.T) {
	ld, lrs := New()
	Append(lrs, Item{Body: []byte(`{"a":1}`), Signal: "span", Seq: 1 << 40})
	assert.Zero(t, lrs.At(0).Attributes().Len(), "signal, kind and sequence cost no attribute")
	var got Item
	for lr := range All(ld) {
		got = Read(lr)
	}
	assert.Equal(t, Item{Body: []byte(`{"a":1}`), Signal: "span", Kind: KindRecord, Seq: 1 << 40}, got)

	SetFailed(lrs.At(0), "too large")
	assert.Equal(t, KindFailed, KindOf(lrs.At(0)))
	got = Read(lrs.At(0))
	assert.Equal(t, KindFailed, got.Kind)
	assert.Equal(t, "too large", got.Error)
	assert.Equal(t, uint64(1<<40), got.Seq)
}
