package service

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/outbound"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
)

type received struct {
	method string
	header http.Header
	body   []byte
}

func receiver(t *testing.T, status int, answer string) (*httptest.Server, chan received) {
	got := make(chan received, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- received{r.Method, r.Header.Clone(), b}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

func TestSendTestMessageToAWebhook(t *testing.T) {
	srv, got := receiver(t, http.StatusAccepted, "thanks")
	secret := webhooksig.NewSecret()
	sink := mirror.Sink{ID: "s_1", Kind: "webhook", URL: srv.URL + "/hook", Method: "PUT", Headers: map[string]string{"X-Team": "ops"}}

	res := SendTestMessage(context.Background(), outbound.NewClient(outbound.Options{AllowCIDRs: loopback}), "p_1", secret, sink)
	assert.True(t, res.Delivered, "%+v", res)
	assert.Equal(t, http.StatusAccepted, res.StatusCode)
	assert.Equal(t, "thanks", res.ResponseExcerpt)
	assert.Empty(t, res.Error)

	r := <-got
	assert.Equal(t, "PUT", r.method)
	assert.Equal(t, "ops", r.header.Get("X-Team"))
	assert.NotEmpty(t, r.header.Get("X-Request-Id"))
	require.NoError(t, webhooksig.Verify(secret, r.header, r.body, time.Now(), webhooksig.DefaultTolerance),
		"the receiver verifies the project's signature")
	var body map[string]any
	require.NoError(t, json.Unmarshal(r.body, &body))
	assert.Equal(t, map[string]any{"test": true, "text": TestMessageText, "project_id": "p_1"}, body)
}

func TestSendTestMessageToAChat(t *testing.T) {
	srv, got := receiver(t, http.StatusOK, "ok")
	sink := mirror.Sink{ID: "s_2", Kind: "chat", URL: srv.URL, Format: "discord", TextTemplate: "[{project_id}] {text}"}
	res := SendTestMessage(context.Background(), outbound.NewClient(outbound.Options{AllowCIDRs: loopback}), "p_1", "", sink)
	assert.True(t, res.Delivered, "%+v", res)
	var body map[string]any
	require.NoError(t, json.Unmarshal((<-got).body, &body))
	assert.Equal(t, "[p_1] "+TestMessageText, body["content"], "Discord's shape, the template rendered")
}

// A private address is refused unless the deployment allows it, and the answer says so
// and which setting allows it; nothing reaches the server.
func TestSendTestMessageRefusesAPrivateAddress(t *testing.T) {
	srv, got := receiver(t, http.StatusOK, "")
	sink := mirror.Sink{ID: "s_3", Kind: "webhook", URL: srv.URL}
	res := SendTestMessage(context.Background(), outbound.NewClient(outbound.Options{}), "p_1", webhooksig.NewSecret(), sink)
	assert.False(t, res.Delivered)
	assert.Zero(t, res.StatusCode)
	assert.Contains(t, res.Error, "destination refused: 127.0.0.1 is a loopback address")
	assert.Contains(t, res.Error, "SVC_OUTBOUND_ALLOW")
	assert.NotContains(t, res.Error, srv.URL, "the URL (maybe a credential) is not repeated")
	assert.Empty(t, got)
}

func TestSendTestMessageReportsARefusal(t *testing.T) {
	long := make([]byte, 2000)
	for i := range long {
		long[i] = 'x'
	}
	srv, _ := receiver(t, http.StatusUnauthorized, string(long))
	res := SendTestMessage(context.Background(), outbound.NewClient(outbound.Options{AllowCIDRs: loopback}), "p_1", webhooksig.NewSecret(),
		mirror.Sink{Kind: "webhook", URL: srv.URL})
	assert.False(t, res.Delivered)
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode)
	assert.Equal(t, "the destination answered 401 Unauthorized", res.Error)
	assert.Len(t, res.ResponseExcerpt, 512)
}
