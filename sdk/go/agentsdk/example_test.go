package agentsdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/sdk/go/agentsdk"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// collectorCall builds the request the collector sends to an agent.
func collectorCall(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/agent", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Request-Id", "req_0123456789abcdef0123456789abcdef")
	_ = webhooksig.SetHeaders(r.Header, secret, "req_0123456789abcdef0123456789abcdef", time.Now(), []byte(body))
	return r
}

// An agent: it verifies the collector's call, answers it at once, and sends its result
// to the receiver (played here by a local server that prints what it gets).
func Example() {
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Println("receiver got:", r.URL.Path, string(b))
		w.WriteHeader(http.StatusAccepted)
	}))
	defer receiver.Close()

	verifier := agentsdk.Verifier{Secret: secret}
	client := &agentsdk.Client{ReceiverURL: receiver.URL, APIKey: "sk_example"}
	done := make(chan struct{})

	agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call, err := verifier.ParseCall(r)
		if err != nil {
			http.Error(w, err.Error(), agentsdk.HTTPStatus(err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"accepted"}`)

		go func() {
			defer close(done)
			result := map[string]any{"records_seen": len(call.Records)}
			if err := client.SendResult(context.Background(), call.RequestID, result); err != nil {
				fmt.Println("send failed:", err)
			}
		}()
	})

	w := httptest.NewRecorder()
	agent.ServeHTTP(w, collectorCall(`[{"level":"error","msg":"disk full"},{"level":"warn","msg":"disk 90%"}]`))
	fmt.Println("agent answered:", w.Code, w.Body.String())
	<-done
	// Output:
	// agent answered: 200 {"status":"accepted"}
	// receiver got: /internal/agent-output {"request_id":"req_0123456789abcdef0123456789abcdef","payload":{"records_seen":2}}
}

func ExampleVerifier_ParseCall_window() {
	call, err := agentsdk.Verifier{Secret: secret}.ParseCall(collectorCall(
		`{"trigger":{"level":"error","msg":"checkout failed"},"window":[{"level":"info","msg":"cart opened"}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(call.Windowed(), string(call.Trigger), len(call.Window))
	// Output: true {"level":"error","msg":"checkout failed"} 1
}

func ExampleParseCall_forged() {
	r := collectorCall(`[{"amount":42}]`)
	r.Body = io.NopCloser(strings.NewReader(`[{"amount":4200}]`))
	_, err := agentsdk.ParseCall(r, secret)
	fmt.Println(agentsdk.HTTPStatus(err), err)
	// Output: 401 the request's signature does not verify: no webhook signature matches
}

// A webhook sink's receiver gets an agent's result as the body, signed the same way.
func ExampleVerifyWebhook() {
	wh, err := agentsdk.VerifyWebhook(collectorCall(`{"summary":"disk full on db-1"}`), secret)
	if err != nil {
		fmt.Println(err)
		return
	}
	var result struct{ Summary string }
	_ = json.Unmarshal(wh.Payload, &result)
	fmt.Println(wh.RequestID, result.Summary)
	// Output: req_0123456789abcdef0123456789abcdef disk full on db-1
}

func ExampleClient_SendResult() {
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"code":"invalid_api_key","message":"the API key is not valid or was revoked"}}`)
	}))
	defer receiver.Close()

	client := &agentsdk.Client{ReceiverURL: receiver.URL, APIKey: "sk_revoked"}
	err := client.SendResult(context.Background(), "req_0123456789abcdef0123456789abcdef", json.RawMessage(`{"ok":true}`))
	var apiErr *agentsdk.APIError
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.Status, apiErr.Code)
	}
	// Output: 401 invalid_api_key
}
