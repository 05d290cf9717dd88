// Package responder answers the control plane's pipeline checks (components/validation)
// with the data plane's own compiler, as a NATS micro service. Every collector role runs
// it (the projectauth extension starts it), and micro's queue group has any one of them
// answer each check.
package responder

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/components/validation"
)

// Start registers the service on nc; Stop the returned service to leave.
func Start(nc *nats.Conn) (micro.Service, error) {
	return micro.AddService(nc, micro.Config{
		Name:        validation.ServiceName,
		Version:     validation.Version,
		Description: "checks a project's pipeline (contract section 6) as the data plane will run it",
		Endpoint: &micro.EndpointConfig{
			Subject: validation.Subject,
			Handler: micro.HandlerFunc(handle),
		},
	})
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
