package natsclient_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/extension/embeddednatsextension"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/lifecyclehost"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

type host = lifecyclehost.Host

type embedded struct {
	component.StartFunc
	component.ShutdownFunc
	url string
}

func (e embedded) ClientURL() string { return e.url }

type other struct {
	component.StartFunc
	component.ShutdownFunc
}

func TestConnectDialsTheNamedExtension(t *testing.T) {
	h := lifecyclehost.NATSOnly(t) // the real embeddednats extension
	url := h[natsclient.DefaultExtension].(natsclient.Embedded).ClientURL()
	// Another embedded server in the host must not be taken for the named one.
	h[component.MustNewIDWithName("embeddednats", "other")] = embedded{url: "nats://127.0.0.1:1"}
	nc, js, err := natsclient.DefaultConfig().ConnectJetStream(h, "test", zap.NewNop())
	require.NoError(t, err)
	defer nc.Close()
	require.Equal(t, url, nc.ConnectedUrl())
	_, err = js.AccountInfo(context.Background())
	require.NoError(t, err, "the JetStream context works on the connection")
}

func TestConnectRefusesAMissingOrWrongExtension(t *testing.T) {
	named := natsclient.DefaultConfig()
	named.Extension = component.MustNewIDWithName("embeddednats", "second")
	for name, tc := range map[string]struct {
		cfg  natsclient.Config
		host natsclient.Host
		want string
	}{
		"missing":       {natsclient.DefaultConfig(), host{}, `extension "embeddednats" is not running`},
		"no host":       {natsclient.DefaultConfig(), nil, `extension "embeddednats" is not running`},
		"other name":    {named, host{natsclient.DefaultExtension: embedded{url: "nats://127.0.0.1:1"}}, `extension "embeddednats/second" is not running`},
		"not embedded":  {natsclient.DefaultConfig(), host{natsclient.DefaultExtension: other{}}, "is not an embedded NATS server"},
		"external only": {natsclient.DefaultConfig(), host{natsclient.DefaultExtension: embedded{}}, "runs no server"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tc.cfg.Connect(tc.host, "test", zap.NewNop())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestURLWinsOverTheExtension(t *testing.T) {
	srv := testenv.StartNATS(t)
	cfg := natsclient.DefaultConfig()
	cfg.URL = srv.URL()
	nc, err := cfg.Connect(host{}, "test", zap.NewNop())
	require.NoError(t, err)
	defer nc.Close()
	assert.Equal(t, srv.URL(), nc.ConnectedUrl())
}

func TestValidate(t *testing.T) {
	assert.NoError(t, natsclient.DefaultConfig().Validate())
	noExt := natsclient.DefaultConfig()
	noExt.Extension = component.ID{}
	assert.ErrorContains(t, noExt.Validate(), "set url, or extension")
	noExt.URL = "nats://a:4222,tls://b:4222"
	assert.NoError(t, noExt.Validate())
	bad := natsclient.DefaultConfig()
	bad.URL = "http://a:4222"
	assert.ErrorContains(t, bad.Validate(), "scheme must be nats")
}

// statusHost records the status events a component reports.
type statusHost struct {
	host
	mu     sync.Mutex
	events []*componentstatus.Event
}

func (h *statusHost) Report(ev *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
}

func (h *statusHost) last() *componentstatus.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) == 0 {
		return nil
	}
	return h.events[len(h.events)-1]
}

// A component that acts on reconnections (the JetStream receiver sweeps its consumers)
// must not take the connection's OK report away: it once replaced the
// reconnect handler, and the process stayed unhealthy for good after a NATS blip.
func TestReconnectHooksKeepTheHealthReport(t *testing.T) {
	srv := testenv.StartNATS(t)
	cfg := natsclient.DefaultConfig()
	cfg.URL = srv.URL()
	h := &statusHost{host: host{}}
	nc, err := cfg.Connect(h, "test", zap.NewNop())
	require.NoError(t, err)
	defer nc.Close()
	var swept, other atomic.Int32
	natsclient.OnReconnect(nc, func() { swept.Add(1) })
	remove := natsclient.OnReconnect(nc, func() { other.Add(1) })
	remove()

	srv.Stop()
	require.Eventually(t, func() bool {
		ev := h.last()
		return ev != nil && ev.Status() == componentstatus.StatusRecoverableError
	}, 10*time.Second, 10*time.Millisecond, "a lost NATS is reported")
	assert.ErrorContains(t, h.last().Err(), "waiting for NATS at "+srv.URL())

	srv.Start(t)
	require.Eventually(t, func() bool {
		ev := h.last()
		return ev.Status() == componentstatus.StatusOK && swept.Load() == 1
	}, 10*time.Second, 10*time.Millisecond, "OK again, and the hook ran, once NATS is back")
	assert.Zero(t, other.Load(), "a removed hook does not run")
}

// A connection not made by Connect keeps its own handler and gets the hook after it.
func TestOnReconnectChainsAForeignHandler(t *testing.T) {
	srv := testenv.StartNATS(t)
	var own, hook atomic.Int32
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.ReconnectHandler(func(*nats.Conn) { own.Add(1) }))
	require.NoError(t, err)
	defer nc.Close()
	natsclient.OnReconnect(nc, func() { hook.Add(1) })
	srv.Stop()
	srv.Start(t)
	require.Eventually(t, func() bool { return own.Load() == 1 && hook.Load() == 1 }, 10*time.Second, 10*time.Millisecond)
}

// inProcessHost is a host with the real embeddednats extension, its in_process_clients on.
func inProcessHost(t *testing.T) host {
	t.Helper()
	f := embeddednatsextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*embeddednatsextension.Config)
	cfg.Listen = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	cfg.StoreDir = t.TempDir()
	cfg.InProcessClients = true
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), host{}))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return host{natsclient.DefaultExtension: ext}
}

// With in_process_clients on, the components of the collector that runs the embedded
// server reach it in memory, not through its loopback listener; by default, and with a
// URL, through the listener.
func TestEmbeddedServerIsReachedInProcess(t *testing.T) {
	def, err := natsclient.DefaultConfig().Connect(lifecyclehost.NATSOnly(t), "test", zap.NewNop())
	require.NoError(t, err)
	defer def.Close()
	assert.NotEqual(t, "pipe", def.ConnectedAddr(), "off by default")

	h := inProcessHost(t)
	nc, js, err := natsclient.DefaultConfig().ConnectJetStream(h, "test", zap.NewNop())
	require.NoError(t, err)
	defer nc.Close()
	assert.Equal(t, "pipe", nc.ConnectedAddr(), "connected through net.Pipe, not a socket")
	_, err = js.AccountInfo(context.Background())
	require.NoError(t, err, "JetStream works over the in-process connection")

	// A URL, even the embedded server's own, is dialled as given.
	cfg := natsclient.DefaultConfig()
	cfg.URL = h[natsclient.DefaultExtension].(natsclient.Embedded).ClientURL()
	tcp, err := cfg.Connect(h, "test", zap.NewNop())
	require.NoError(t, err)
	defer tcp.Close()
	assert.NotEqual(t, "pipe", tcp.ConnectedAddr())
}

// An in-process connection loses its server when the extension stops, and comes back, with
// the health report and the hooks, when it runs again: as a TCP connection does.
func TestInProcessConnectionReconnectsToTheServerStartedAgain(t *testing.T) {
	nh := inProcessHost(t)
	ext := nh[natsclient.DefaultExtension]
	h := &statusHost{host: nh}
	nc, err := natsclient.DefaultConfig().Connect(h, "test", zap.NewNop())
	require.NoError(t, err)
	defer nc.Close()
	require.Equal(t, "pipe", nc.ConnectedAddr())
	var hooked atomic.Int32
	natsclient.OnReconnect(nc, func() { hooked.Add(1) })

	require.NoError(t, ext.Shutdown(context.Background()))
	require.Eventually(t, func() bool {
		ev := h.last()
		return ev != nil && ev.Status() == componentstatus.StatusRecoverableError
	}, 10*time.Second, 10*time.Millisecond, "a stopped server is reported")
	assert.ErrorContains(t, h.last().Err(), "NATS is unreachable")

	require.NoError(t, ext.Start(context.Background(), nh))
	require.Eventually(t, func() bool {
		ev := h.last()
		return ev.Status() == componentstatus.StatusOK && hooked.Load() == 1
	}, 10*time.Second, 10*time.Millisecond, "OK again, and the hook ran, once the server runs again")
	assert.Equal(t, "pipe", nc.ConnectedAddr())
	require.NoError(t, nc.Publish("x", nil))
	require.NoError(t, nc.Flush())
}

// A component started before the extension's server (the collector starts extensions in
// their listed order) connects once the server runs, as it did over TCP.
func TestInProcessConnectionWaitsForTheServerToStart(t *testing.T) {
	nh := inProcessHost(t)
	ext := nh[natsclient.DefaultExtension]
	require.NoError(t, ext.Shutdown(context.Background()))
	nc, err := natsclient.DefaultConfig().Connect(nh, "test", zap.NewNop())
	require.NoError(t, err, "Connect returns while the server is not running")
	defer nc.Close()
	assert.False(t, nc.IsConnected())
	require.NoError(t, ext.Start(context.Background(), nh))
	require.Eventually(t, nc.IsConnected, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, "pipe", nc.ConnectedAddr())
}
