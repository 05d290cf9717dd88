// Package agentsdk is the Go SDK for AI agents called by otelcol-svc. It has two halves:
//
//   - receiving: ParseCall checks a call's Standard Webhooks signature (webhook-id,
//     webhook-timestamp, webhook-signature, keyed with the project's whsec_ secret) and
//     decodes its body, a JSON array of records (batch mode) or
//     {"trigger": <record>, "window": [<records>]} (window mode). VerifyWebhook does the
//     same for a webhook sink, whose body is an agent's result, any JSON value.
//   - answering: Client.SendResult posts the agent's result to the receiver's
//     POST /internal/agent-output with the project's API key, retrying what is worth
//     retrying.
//
// A minimal agent:
//
//	verifier := agentsdk.Verifier{Secret: os.Getenv("OTELCOL_SVC_SIGNING_SECRET")}
//	client := &agentsdk.Client{ReceiverURL: "http://localhost:4318", APIKey: os.Getenv("OTELCOL_SVC_API_KEY")}
//
//	http.HandleFunc("POST /agent", func(w http.ResponseWriter, r *http.Request) {
//		call, err := verifier.ParseCall(r)
//		if err != nil {
//			http.Error(w, err.Error(), agentsdk.HTTPStatus(err))
//			return
//		}
//		// Answer at once: the collector waits for this answer, and retries on timeout.
//		w.Header().Set("Content-Type", "application/json")
//		w.Write([]byte(`{"status":"accepted"}`))
//		go func() {
//			result := analyse(call) // your agent
//			if err := client.SendResult(context.Background(), call.RequestID, result); err != nil {
//				log.Print(err)
//			}
//		}()
//	})
//
// The signature scheme is the one of internal/webhooksig, which this package uses; the
// Python and TypeScript SDKs beside it (sdk/python, sdk/typescript) implement the same.
package agentsdk
