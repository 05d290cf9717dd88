// Package responder answers the control plane's pipeline checks (internal/validation)
// with the data plane's own compiler, and its backlog previews with the dry run's
// evaluator, as a NATS micro service. Every collector role runs
// it (the configmirror extension starts it), and micro's queue group has any one of them
// answer each check.
package validationresponder

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
)

// Start registers the service on nc; Stop the returned service to leave. WithBacklogs
// gives it JetStream and the data plane's mirror, which the backlog preview (backlog.go)
// reads; without, previews are refused as unavailable.
func Start(nc *nats.Conn, opts ...Option) (micro.Service, error) {
	var o startOptions
	for _, f := range opts {
		f(&o)
	}
	js := o.js
	svc, err := micro.AddService(nc, micro.Config{
		Name:        validation.ServiceName,
		Version:     validation.Version,
		Description: "checks a project's pipeline (contract section 6) as the data plane will run it, and previews backlogs",
		Endpoint: &micro.EndpointConfig{
			Subject: validation.Subject,
			Handler: micro.HandlerFunc(newChecker(js).handle), // warnings.go
		},
	})
	if err != nil {
		return nil, err
	}
	var pv *previewer
	if o.projects != nil {
		pv = newPreviewer(js, o.projects, o.limits)
	}
	if err := svc.AddEndpoint("backlog-preview", micro.HandlerFunc(pv.handle), micro.WithEndpointSubject(validation.BacklogSubject)); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	// The subscriptions are sent asynchronously: a round trip makes the server hold them
	// before Start returns, so a check sent right after (another connection, the control
	// plane) finds this responder instead of "no responders". A NATS that is away now
	// gets them at reconnect, as every subscription.
	_ = nc.FlushTimeout(2 * time.Second)
	return svc, nil
}

// Option configures Start.
type Option func(*startOptions)

type startOptions struct {
	js       jetstream.JetStream
	projects Projects
	limits   Options
}

// WithJetStream gives the service JetStream alone: the pipeline check's warnings read
// the project's records (warnings.go); backlog previews stay unavailable.
func WithJetStream(js jetstream.JetStream) Option {
	return func(o *startOptions) { o.js = js }
}

// WithBacklogs answers backlog previews from js and the data plane's mirror, under the
// deployment's limits (OptionsFromEnv).
func WithBacklogs(js jetstream.JetStream, projects Projects, limits Options) Option {
	return func(o *startOptions) { o.js, o.projects, o.limits = js, projects, limits }
}

// Check compiles p; the answer's message is the one the control plane has always shown.
func Check(p mirror.Pipeline) validation.Result {
	if _, err := pipelinecfg.Compile(p); err != nil {
		if fe, ok := pipelinecfg.IsFieldError(err); ok {
			return validation.Result{Field: fe.Field, Message: fe.Err.Error()}
		}
		return validation.Result{Field: "pipeline", Message: err.Error()}
	}
	return validation.Result{OK: true}
}
