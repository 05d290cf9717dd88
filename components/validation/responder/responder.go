// Package responder answers the control plane's pipeline checks (components/validation)
// with the data plane's own compiler, and its backlog previews with the dry run's
// evaluator, as a NATS micro service. Every collector role runs
// it (the projectauth extension starts it), and micro's queue group has any one of them
// answer each check.
package responder

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/components/validation"
)

// Start registers the service on nc; Stop the returned service to leave. js and projects
// (the data plane's mirror) serve the backlog preview (backlog.go), which reads the
// project's stored records.
func Start(nc *nats.Conn, js jetstream.JetStream, projects Projects, opts Options) (micro.Service, error) {
	svc, err := micro.AddService(nc, micro.Config{
		Name:        validation.ServiceName,
		Version:     validation.Version,
		Description: "checks a project's pipeline (contract section 6) as the data plane will run it, and previews backlogs",
		Endpoint: &micro.EndpointConfig{
			Subject: validation.Subject,
			Handler: micro.HandlerFunc(handle),
		},
	})
	if err != nil {
		return nil, err
	}
	pv := newPreviewer(js, projects, opts)
	if err := svc.AddEndpoint("backlog-preview", micro.HandlerFunc(pv.handle), micro.WithEndpointSubject(validation.BacklogSubject)); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	return svc, nil
}

func handle(req micro.Request) {
	var p mirror.Pipeline
	// Unknown fields are ignored: a newer control plane may send settings this process
	// does not know, and they are not for it to refuse.
	if err := json.Unmarshal(req.Data(), &p); err != nil {
		_ = req.Error("400", "the body is not a pipeline: "+err.Error(), nil)
		return
	}
	_ = req.RespondJSON(Check(p))
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
