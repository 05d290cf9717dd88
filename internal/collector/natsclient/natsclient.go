// Package natsclient is the NATS connection settings every data-plane component shares, so
// operators configure NATS the same way in each (url, credentials, timeouts), and every
// connection reconnects forever instead of failing the collector.
package natsclient

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// DefaultURL is where the embedded NATS listens.
const DefaultURL = "nats://127.0.0.1:4223"

// DefaultExtension is the embedded NATS extension of our configs.
var DefaultExtension = component.MustNewID("embeddednats")

// Config is the `nats:` block of our components.
type Config struct {
	// URL is one or more comma-separated server URLs. Empty means the server of the
	// Extension (wherever it listens).
	URL string `mapstructure:"url"`
	// Extension names the embedded NATS extension dialled when URL is empty. It is named
	// rather than found among the host's extensions so that a second one, or a renamed
	// one, is never picked by accident.
	Extension component.ID `mapstructure:"extension"`
	// CredentialsFile is a NATS .creds file (JWT + nkey), for secured clusters.
	CredentialsFile string `mapstructure:"credentials_file"`
	// Token is a NATS auth token, for servers configured with one.
	Token configopaque.String `mapstructure:"token"`
	// ConnectTimeout bounds each dial.
	ConnectTimeout time.Duration `mapstructure:"connect_timeout"`
}

// DefaultConfig points at the embedded server.
func DefaultConfig() Config {
	return Config{Extension: DefaultExtension, ConnectTimeout: 2 * time.Second}
}

// Embedded is implemented by the embeddednats extension.
type Embedded interface {
	// ClientURL is where the embedded server listens, or "" when it is not running
	// because an external NATS is configured.
	ClientURL() string
}

// InProcess is implemented by the embeddednats extension too: the server it runs takes
// this process's connections in memory, sparing each publish and ack the loopback
// socket's system calls.
type InProcess interface {
	// InProcessServer is what nats.go connects through, or nil to dial ClientURL (the
	// extension's in_process_clients is off, or it runs no server).
	InProcessServer() nats.InProcessConnProvider
}

// Host is the part of component.Host used to find the embedded server.
type Host interface {
	GetExtensions() map[component.ID]component.Component
}

// Resolve returns the URL to dial: the configured one, else the one of the extension the
// config names, which must be running in the host.
func (c Config) Resolve(host Host) (string, error) {
	u, _, err := c.resolve(host)
	return u, err
}

// resolve is Resolve plus the extension's in-process server when the URL is its.
func (c Config) resolve(host Host) (string, nats.InProcessConnProvider, error) {
	if c.URL != "" {
		return c.URL, nil, nil
	}
	var ext component.Component
	if host != nil {
		ext = host.GetExtensions()[c.Extension]
	}
	if ext == nil {
		return "", nil, fmt.Errorf("nats: url is empty and the extension %q is not running: add it to service.extensions, or set nats.url", c.Extension)
	}
	e, ok := ext.(Embedded)
	if !ok {
		return "", nil, fmt.Errorf("nats: extension %q is not an embedded NATS server (nats.extension must name an embeddednats extension)", c.Extension)
	}
	u := e.ClientURL()
	if u == "" {
		return "", nil, fmt.Errorf("nats: the extension %q runs no server (its external_url is set): set nats.url to the same server", c.Extension)
	}
	var in nats.InProcessConnProvider
	if ip, ok := ext.(InProcess); ok {
		in = ip.InProcessServer()
	}
	return u, in, nil
}

// Validate checks the URLs.
func (c Config) Validate() error {
	var errs []error
	if c.URL == "" && c.Extension.Type().String() == "" {
		errs = append(errs, errors.New("set url, or extension to the embedded NATS extension to use"))
	}
	for _, u := range streams.SplitURLs(c.URL) {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil || p.Host == "" {
			errs = append(errs, fmt.Errorf("nats url %q is not a URL like nats://host:4222", u))
			continue
		}
		switch p.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			errs = append(errs, fmt.Errorf("nats url %q: scheme must be nats, tls, ws or wss", u))
		}
	}
	if c.ConnectTimeout < 0 {
		errs = append(errs, errors.New("connect_timeout must not be negative"))
	}
	return errors.Join(errs...)
}

// Connect dials NATS. It returns at once even when no server is up yet: the connection
// keeps retrying in the background (the collector must start, and later recover, while
// NATS is down), and callers check IsConnected to answer 503 meanwhile.
//
// The connection's state is the component's status (componentstatus, which the
// health_check extension aggregates): a recoverable error naming what the component waits
// for while NATS is unreachable, OK again once it is back, so a process whose NATS is
// gone is not reported healthy, and one whose NATS is back is not kept unhealthy.
//
// nats.go keeps one handler of each kind per connection, and a second SetReconnectHandler
// silently replaces the first: a component that did so once took the OK report with it,
// and its process stayed unhealthy for good after any NATS blip. So the
// handlers installed here are the only ones; code that needs to act on a reconnection
// adds a hook with OnReconnect instead of calling SetReconnectHandler.
func (c Config) Connect(host Host, name string, logger *zap.Logger) (*nats.Conn, error) {
	u, inProcess, err := c.resolve(host)
	if err != nil {
		return nil, err
	}
	reporter, _ := host.(componentstatus.Reporter)
	report := func(ev *componentstatus.Event) {
		if reporter != nil {
			reporter.Report(ev)
		}
	}
	where := streams.RedactURLs(u)
	hs := &hooks{reconnect: map[int]func(){}}
	opts := []nats.Option{
		nats.Name(name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		// While disconnected, publishes fail fast rather than filling a buffer the
		// caller would wrongly treat as stored.
		nats.ReconnectBufSize(-1),
		nats.Timeout(c.timeout()),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil {
				logger.Warn("NATS disconnected", zap.String("connection", name), zap.Error(err))
			}
			if !nc.IsClosed() {
				report(componentstatus.NewRecoverableErrorEvent(fmt.Errorf("waiting for NATS at %s: NATS is unreachable (connection %q lost, reconnecting)", where, name)))
			}
		}),
		nats.ConnectHandler(func(*nats.Conn) {
			// Only after a first connect that had to be retried.
			report(componentstatus.NewEvent(componentstatus.StatusOK))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			logger.Info("NATS reconnected", zap.String("connection", name), zap.String("server", nc.ConnectedUrlRedacted()))
			report(componentstatus.NewEvent(componentstatus.StatusOK))
			hs.run()
		}),
		nats.ClosedHandler(func(nc *nats.Conn) { registry.Delete(nc) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			logger.Warn("NATS error", zap.String("connection", name), zap.Error(err))
		}),
	}
	if c.CredentialsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredentialsFile))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(string(c.Token)))
	}
	if inProcess != nil {
		// Every (re)connect asks the extension for a pipe to the server it runs then;
		// u stays the server's name in logs and status.
		opts = append(opts, nats.InProcessServer(inProcess))
	}
	nc, err := nats.Connect(u, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats connect: %w", err)
	}
	registry.Store(nc, hs)
	if !nc.IsConnected() {
		report(componentstatus.NewRecoverableErrorEvent(fmt.Errorf("waiting for NATS at %s: NATS is unreachable (connection %q not established yet)", where, name)))
		if nc.IsConnected() { // connected meanwhile: the handler's OK may have come first
			report(componentstatus.NewEvent(componentstatus.StatusOK))
		}
	}
	return nc, nil
}

// hooks are the reconnection hooks of one connection made by Connect.
type hooks struct {
	mu        sync.Mutex
	next      int
	reconnect map[int]func()
}

func (h *hooks) run() {
	h.mu.Lock()
	fs := make([]func(), 0, len(h.reconnect))
	for _, f := range h.reconnect {
		fs = append(fs, f)
	}
	h.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// registry maps each open connection made by Connect to its hooks (removed when the
// connection closes).
var registry sync.Map

// OnReconnect runs f, on nats.go's callback goroutine, every time nc is connected again
// after losing its server, alongside
// the component status report and every other hook. It returns a function that removes
// the hook. For a connection not made by Connect, f is chained after the handler the
// connection has (and stays until the connection closes).
func OnReconnect(nc *nats.Conn, f func()) (remove func()) {
	if v, ok := registry.Load(nc); ok {
		h := v.(*hooks)
		h.mu.Lock()
		id := h.next
		h.next++
		h.reconnect[id] = f
		h.mu.Unlock()
		return func() {
			h.mu.Lock()
			delete(h.reconnect, id)
			h.mu.Unlock()
		}
	}
	prev := nc.ReconnectHandler()
	nc.SetReconnectHandler(func(c *nats.Conn) {
		if prev != nil {
			prev(c)
		}
		f()
	})
	return func() {}
}

// ConnectJetStream is Connect plus a JetStream context on the connection: what every
// data-plane component needs at Start. The connection is closed again when JetStream
// cannot be set up.
func (c Config) ConnectJetStream(host Host, name string, logger *zap.Logger, opts ...jetstream.JetStreamOpt) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := c.Connect(host, name, logger)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}

func (c Config) timeout() time.Duration {
	if c.ConnectTimeout > 0 {
		return c.ConnectTimeout
	}
	return 2 * time.Second
}
