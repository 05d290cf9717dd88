package delivery

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

func attrsOf(o metric.MeasurementOption) attribute.Set {
	return metric.NewAddConfig([]metric.AddOption{o}).Attributes()
}

// A delivery records several measurements: their attributes are the values asked for,
// and asking again for the same values builds nothing.
func TestAttrSetsBuildEachCombinationOnce(t *testing.T) {
	a := NewAttrSets("kind", "outcome")
	got := attrsOf(a.Of("webhook", OutcomeDelivered))
	want := attribute.NewSet(attribute.String("kind", "webhook"), attribute.String("outcome", OutcomeDelivered))
	if !got.Equals(&want) {
		t.Fatalf("attributes %v, want %v", got.ToSlice(), want.ToSlice())
	}
	if other := attrsOf(a.Of("chat", OutcomeDelivered)); other.Equals(&want) {
		t.Fatalf("chat's attributes are webhook's: %v", other.ToSlice())
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = a.Of("webhook", OutcomeDelivered) }); allocs != 0 {
		t.Fatalf("a measurement's attributes cost %.0f allocations each time, want none once built", allocs)
	}
	one := NewAttrSets("outcome")
	if got, want := attrsOf(one.Of(AttemptOK)), attribute.NewSet(attribute.String("outcome", AttemptOK)); !got.Equals(&want) {
		t.Fatalf("attributes %v, want %v", got.ToSlice(), want.ToSlice())
	}
	if got, want := attrsOf(Attr("reason", "retry_after")), attribute.NewSet(attribute.String("reason", "retry_after")); !got.Equals(&want) {
		t.Fatalf("attributes %v, want %v", got.ToSlice(), want.ToSlice())
	}
}

// Values beyond the few the code names (a kind from a newer control plane) are measured
// all the same, without growing the cache without bound.
func TestAttrSetsStayBounded(t *testing.T) {
	a := NewAttrSets("kind")
	for i := range 3 * maxAttrSets {
		v := string(rune('a'+i%26)) + string(rune('a'+i/26))
		if got, want := attrsOf(a.Of(v)), attribute.NewSet(attribute.String("kind", v)); !got.Equals(&want) {
			t.Fatalf("attributes %v, want %v", got.ToSlice(), want.ToSlice())
		}
	}
	if n := len(a.opts); n > maxAttrSets {
		t.Fatalf("%d attribute sets kept, want at most %d", n, maxAttrSets)
	}
}
