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
