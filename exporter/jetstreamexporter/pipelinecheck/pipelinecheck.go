// Package pipelinecheck is a confmap converter that refuses a configuration putting an
// asynchronous processor (the stock batch processor, for one) in front of the jetstream
// exporter.
//
// The exporter stores each request synchronously so that the receiver's 2xx means
// "stored", and it reads what it needs about the request from the request's context: the
// authenticated project (client.Info.Auth, which projectauth sets) and, for the ingest
// receiver's events, push-source records and agent results, the record facts of
// internal/ingestctx. A processor that queues data and exports it later from its own
// goroutine (batch) drops that context and breaks the 2xx-after-storage promise, so every
// such request would fail. Carrying the project in the data instead would let any OTLP
// client name another project (tenant isolation), so the coupling stays, made explicit.
//
// Why a converter: the collector has no hook that lets a component see the pipeline it
// sits in, and `otelcol-svc validate` only unmarshals configs and creates components.
// Converters see the whole resolved configuration and run for `validate` and at start
// alike, so the same configuration is refused the same way in both, before anything runs.
package pipelinecheck

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/confmap"
)

// exporterType is the jetstream exporter's component type.
const exporterType = "jetstream"

// synchronous lists the processor types known to hand data to the next consumer within
// the call, with the caller's context: the only ones that may sit before the exporter.
// Hand-written, as no collector API says whether a processor is synchronous.
var synchronous = map[string]bool{
	"memory_limiter": true,
}

// NewFactory returns the converter's factory, as ocb's `converters:` expects.
func NewFactory() confmap.ConverterFactory {
	return confmap.NewConverterFactory(func(confmap.ConverterSettings) confmap.Converter { return converter{} })
}

type converter struct{}

// Convert changes nothing; it fails on a pipeline the jetstream exporter cannot work in.
func (converter) Convert(_ context.Context, conf *confmap.Conf) error {
	return Check(conf.ToStringMap())
}

// Check returns an error naming every pipeline that puts a processor other than the
// synchronous ones before a jetstream exporter. raw is a resolved collector configuration.
func Check(raw map[string]any) error {
	service, _ := raw["service"].(map[string]any)
	pipelines, _ := service["pipelines"].(map[string]any)
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(pipelines)) {
		p, _ := pipelines[name].(map[string]any)
		exporter, ok := firstOfType(p["exporters"], exporterType)
		if !ok {
			continue
		}
		for _, proc := range idList(p["processors"]) {
			if synchronous[componentType(proc)] {
				continue
			}
			errs = append(errs, fmt.Errorf("pipeline %q: processor %q cannot sit before the %q exporter: "+
				"the exporter stores each request before the receiver answers (a 2xx means stored) and reads the request's project from the request itself, "+
				"which an asynchronous processor such as batch does not pass on, so every request would fail; "+
				"remove %q from the pipeline: only memory_limiter may sit before this exporter",
				name, proc, exporter, proc))
		}
	}
	return errors.Join(errs...)
}

// componentType is the type part of a component id ("batch" of "batch/2").
func componentType(id string) string {
	t, _, _ := strings.Cut(id, "/")
	return t
}

func firstOfType(list any, typ string) (string, bool) {
	for _, id := range idList(list) {
		if componentType(id) == typ {
			return id, true
		}
	}
	return "", false
}

// idList returns the string items of a YAML list (other items cannot name components;
// the collector's own validation reports them).
func idList(list any) []string {
	items, _ := list.([]any)
	out := make([]string, 0, len(items))
	for _, it := range items {
		if s, ok := it.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
