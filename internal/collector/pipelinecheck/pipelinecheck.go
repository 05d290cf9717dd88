// Package pipelinecheck is a confmap converter that refuses a configuration putting an
// asynchronous processor (the stock batch processor, for one) in a pipeline whose
// components talk through the request's context: in front of the jetstream exporter
// (ingest role), in the pipeline role (jetstream receiver, trigger, window and incident
// processors, agent exporter) and in the sink role (jetstream receiver, sink exporter).
//
// The exporter stores each request synchronously so that the receiver's 2xx means
// "stored", and it reads what it needs about the request from the request's context: the
// authenticated project (client.Info.Auth, which projectauth sets) and, for the ingest
// receiver's events, push-source records and agent results, the record facts of
// internal/pipelinectx. A processor that queues data and exports it later from its own
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

// synchronous lists the processor types known to hand data to the next consumer within
// the call, with the caller's context: the only ones that may sit in a pipeline whose
// components talk through the context. Hand-written, as no collector API says whether a
// processor is synchronous.
var synchronous = map[string]bool{
	"memory_limiter": true,
	"trigger":        true,
	"window":         true,
	// Records pass through it within the call; the calls its ticker makes are its own,
	// each with a context it builds (the project, the call's outcome).
	"incident": true,
}

// needs says, per component kind and type, what that component reads from the request's
// context or from the pipeline's call returning, which an asynchronous processor (batch)
// takes away. docs/design.md#context-channels lists the channels, their writers and
// readers.
var needs = map[string]map[string]string{
	"receivers": {
		"jetstream": "the jetstream receiver acknowledges a stream message only when the pipeline's call returns, " +
			"so a processor that queues data would have messages acknowledged before they were processed (lost at a crash)",
	},
	"processors": {
		"trigger":  "the trigger processor reads the project from the request's context",
		"window":   "the window processor reads the project from the request's context",
		"incident": "the incident processor reads the project from the request's context and counts each batch's events in its ledger outcome",
	},
	"exporters": {
		"agent": "the agent exporter reads the project, the batch's order hand-off and the trigger cooldowns it gives back " +
			"on a failed call from the request's context",
		"sink": "the sink exporter reads the project from the request's context",
	},
}

// NewFactory returns the converter's factory, as ocb's `converters:` expects.
func NewFactory() confmap.ConverterFactory {
	return confmap.NewConverterFactory(func(confmap.ConverterSettings) confmap.Converter { return converter{} })
}

type converter struct{}

// Convert changes nothing; it fails on a pipeline our components cannot work in.
func (converter) Convert(_ context.Context, conf *confmap.Conf) error {
	return Check(conf.ToStringMap())
}

// Check returns an error naming every asynchronous processor in a pipeline that holds a
// component which talks through the request's context: the jetstream exporter (ingest
// role), the jetstream receiver, trigger and window processors and agent exporter
// (pipeline role), the sink exporter (sink role). raw is a resolved collector
// configuration.
func Check(raw map[string]any) error {
	service, _ := raw["service"].(map[string]any)
	pipelines, _ := service["pipelines"].(map[string]any)
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(pipelines)) {
		p, _ := pipelines[name].(map[string]any)
		if exporter, ok := firstOfType(p["exporters"], exporterType); ok {
			for _, proc := range others(p["processors"], beforeJetStream) {
				errs = append(errs, fmt.Errorf("pipeline %q: processor %q cannot sit before the %q exporter: "+
					"the exporter stores each request before the receiver answers (a 2xx means stored) and reads the request's project from the request itself, "+
					"which an asynchronous processor such as batch does not pass on, so every request would fail; "+
					"remove %q from the pipeline: only memory_limiter may sit before this exporter",
					name, proc, exporter, proc))
			}
			continue
		}
		var why []string
		for _, kind := range []string{"receivers", "processors", "exporters"} {
			for _, id := range idList(p[kind]) {
				if reason, ok := needs[kind][componentType(id)]; ok && !slices.Contains(why, reason) {
					why = append(why, reason)
				}
			}
		}
		if len(why) == 0 {
			continue
		}
		for _, proc := range others(p["processors"], synchronous) {
			errs = append(errs, fmt.Errorf("pipeline %q: processor %q cannot sit in this pipeline: %s; "+
				"an asynchronous processor such as batch hands data on later, from its own goroutine, without them; "+
				"remove %q: only memory_limiter, trigger, window and incident may sit here",
				name, proc, strings.Join(why, "; "), proc))
		}
	}
	return errors.Join(errs...)
}

// exporterType is the jetstream exporter's component type.
const exporterType = "jetstream"

// beforeJetStream are the processors the ingest role may run: the pipeline's own
// processors filter and reshape for the agent, after storage, never before it.
var beforeJetStream = map[string]bool{"memory_limiter": true}

// others returns the processors of a pipeline's list whose type allowed lacks.
func others(list any, allowed map[string]bool) []string {
	var out []string
	for _, proc := range idList(list) {
		if !allowed[componentType(proc)] {
			out = append(out, proc)
		}
	}
	return out
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
