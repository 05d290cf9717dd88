package embeddednatsextension

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"
)

type embeddedNATS struct {
	cfg    *Config
	logger *zap.Logger
	// srv is read by nats.go's reconnect goroutines (InProcessConn) while Start and
	// Shutdown set it.
	srv atomic.Pointer[server.Server]
}

func (e *embeddedNATS) Start(_ context.Context, _ component.Host) error {
	if e.cfg.ExternalURL != "" {
		// Said plainly, with the URL used: NATS_URL turns the embedded server off whatever
		// its listen setting says, and a healthy collector without it was taken for one
		// running it.
		e.logger.Info("NATS_URL is set: the embedded NATS is not started (its listen setting is unused); components use the external NATS at "+redactURLs(e.cfg.ExternalURL),
			zap.String("nats_url", redactURLs(e.cfg.ExternalURL)))
		return nil
	}
	host, portStr, _ := net.SplitHostPort(e.cfg.Listen)
	port, _ := strconv.Atoi(portStr)
	opts := &server.Options{
		ServerName:         "otelcol-svc-embedded",
		Host:               host,
		Port:               port,
		JetStream:          true,
		StoreDir:           e.cfg.StoreDir,
		JetStreamMaxStore:  e.cfg.MaxStore,
		JetStreamMaxMemory: e.cfg.MaxMemory,
		MaxPayload:         e.cfg.MaxPayload,
		NoSigs:             true, // the collector owns signal handling
		NoLog:              true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("embedded NATS: %w", err)
	}
	srv.SetLoggerV2(natsLogger{e.logger.Named("nats")}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("embedded NATS did not become ready on %s (is the port taken? set NATS_URL to use an external server)", e.cfg.Listen)
	}
	e.srv.Store(srv)
	e.logger.Info("embedded NATS with JetStream started", zap.String("url", srv.ClientURL()), zap.String("store_dir", e.cfg.StoreDir))
	return nil
}

// ClientURL implements natsclient.Embedded: components configured with an empty NATS url
// connect here. It is known before Start, so extension start order does not matter.
func (e *embeddedNATS) ClientURL() string {
	if e.cfg.ExternalURL != "" {
		return ""
	}
	return "nats://" + e.cfg.Listen
}

// Shutdown stops the server last-in, after the pipelines that publish to it: the
// collector shuts extensions down after receivers and exporters.
func (e *embeddedNATS) Shutdown(context.Context) error {
	srv := e.srv.Swap(nil)
	if srv == nil {
		return nil
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	return nil
}

// errNotRunning makes nats.go retry, as a refused TCP dial would, while the server is
// stopped (before Start, after Shutdown).
var errNotRunning = errors.New("the embedded NATS server is not running")

// InProcessServer implements natsclient.InProcess: with in_process_clients on, the
// components of this process talk to the server over an in-memory pipe, without the
// loopback socket's system calls. Other processes still use the TCP listener.
func (e *embeddedNATS) InProcessServer() nats.InProcessConnProvider {
	if e.cfg.ExternalURL != "" || !e.cfg.InProcessClients {
		return nil
	}
	return inProcess{e}
}

// inProcess dials the server the extension runs at the time, so that nats.go's reconnects
// reach a server started again.
type inProcess struct{ e *embeddedNATS }

func (p inProcess) InProcessConn() (net.Conn, error) {
	srv := p.e.srv.Load()
	if srv == nil {
		return nil, errNotRunning
	}
	return srv.InProcessConn()
}

// natsLogger forwards nats-server's log to the collector's logger.
type natsLogger struct{ l *zap.Logger }

func (n natsLogger) Noticef(format string, v ...any) { n.l.Debug(fmt.Sprintf(format, v...)) }
func (n natsLogger) Warnf(format string, v ...any)   { n.l.Warn(fmt.Sprintf(format, v...)) }
func (n natsLogger) Fatalf(format string, v ...any)  { n.l.Error(fmt.Sprintf(format, v...)) }
func (n natsLogger) Errorf(format string, v ...any)  { n.l.Error(fmt.Sprintf(format, v...)) }
func (n natsLogger) Debugf(format string, v ...any)  { n.l.Debug(fmt.Sprintf(format, v...)) }
func (n natsLogger) Tracef(format string, v ...any)  {}

// redactURLs is a comma-separated NATS URL list with each URL's user information (a
// password, or a token in the user's place) replaced, so that the log does not hold it.
func redactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil {
			parts[i] = "(unparsable URL)"
			continue
		}
		if u.User != nil {
			u.User = url.User("redacted")
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}
