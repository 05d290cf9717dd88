package pipelinectx

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHandoffClosesTheSignalOnceFromADerivedContext(t *testing.T) {
	ctx, handed := WithHandoff(context.Background())
	select {
	case <-handed:
		t.Fatal("handed off before Handoff")
	default:
	}
	derived, cancel := context.WithCancel(ctx)
	defer cancel()
	Handoff(derived)
	Handoff(ctx) // again: no panic on a closed channel
	select {
	case <-handed:
	default:
		t.Fatal("Handoff did not signal")
	}
}

func TestHandoffWithoutSignalDoesNothing(t *testing.T) {
	assert.NotPanics(t, func() { Handoff(context.Background()) })
}

func TestEachBatchHasItsOwnSignal(t *testing.T) {
	a, handedA := WithHandoff(context.Background())
	_, handedB := WithHandoff(context.Background())
	Handoff(a)
	<-handedA
	select {
	case <-handedB:
		t.Fatal("another batch's handoff signalled this one")
	default:
	}
}
