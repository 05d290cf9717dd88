package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
)

// The MCP tools take presets and verifications as the API does: create_source shows the
// secret once, list_sources never, rotate_source_secret replaces it (owner and admin
// only), test_source splits a preset's body and checks a sample's headers.
func TestMCPSourceVerification(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startSourceStack(t, db)
		cp := s.cp.URL
		owner, _ := s.signup(t, "mcpv-owner@example.com")
		member, _ := s.signup(t, "mcpv-member@example.com")
		stranger, _ := s.signup(t, "mcpv-stranger@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "v"}).str("id")
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "mcpv-member@example.com"}).Status)
		m := openMirror(t, s.nats.URL())
		cs, err := mcpSession(t, cp, owner)
		require.NoError(t, err)
		ms, err := mcpSession(t, cp, member)
		require.NoError(t, err)
		ss, err := mcpSession(t, cp, stranger)
		require.NoError(t, err)

		alerts := map[string]any{"version": "4", "groupKey": "{}:{alertname=\"Down\"}", "status": "firing",
			"alerts": []any{
				map[string]any{"status": "firing", "labels": map[string]any{"alertname": "Down", "instance": "a"}, "startsAt": "2024-05-01T12:00:00Z", "fingerprint": "f1"},
				map[string]any{"status": "firing", "labels": map[string]any{"alertname": "Down", "instance": "b"}, "startsAt": "2024-05-01T12:00:00Z", "fingerprint": "f2"},
			}}
		basic := map[string]any{"scheme": "basic", "username": "am", "password": "correct-horse-battery"}
		tested, errText := tool(t, ms, "test_source", map[string]any{"project_id": pid, "source": map[string]any{"preset": "alertmanager", "verification": basic},
			"headers": map[string]string{"Authorization": basicAuth("am", "correct-horse-battery").Get("Authorization")}, "payload": alerts})
		require.Empty(t, errText)
		events := tested["events"].([]any)
		require.Len(t, events, 2, "one record per alert")
		for _, ev := range events {
			assert.Equal(t, "alert.firing", ev.(map[string]any)["event_type"])
			assert.NotContains(t, ev.(map[string]any)["envelope"], "payload", "tools never return payloads")
		}
		assert.Equal(t, true, tested["verification"].(map[string]any)["ok"], "%v", tested["verification"])
		raw, _ := json.Marshal(tested)
		assert.NotContains(t, string(raw), "correct-horse-battery")

		// Stripe shows its secret only once it has the URL: the source comes first, without.
		stripe, errText := tool(t, cs, "create_source", map[string]any{"project_id": pid, "name": "stripe", "preset": "stripe", "verification": map[string]any{"scheme": "stripe"}})
		require.Empty(t, errText)
		assert.Equal(t, map[string]any{"scheme": "stripe", "secret_set": false}, stripe["verification"])
		_, errText = tool(t, cs, "delete_source", map[string]any{"project_id": pid, "source_id": stripe["id"]})
		require.Empty(t, errText)

		created, errText := tool(t, cs, "create_source", map[string]any{"project_id": pid, "name": "am", "preset": "alertmanager",
			"verification": map[string]any{"scheme": "basic", "username": "am"}})
		require.Empty(t, errText)
		ver := created["verification"].(map[string]any)
		password := ver["password"].(string)
		assert.Regexp(t, `^[A-Za-z0-9_-]{43}$`, password, "a generated password, shown now")
		assert.Equal(t, "alertmanager", created["preset"])
		id, ingestKey := created["id"].(string), created["ingest_key"].(string)

		for who, c := range map[string]*mcp.ClientSession{"owner": cs, "member": ms} {
			listed, errText := tool(t, c, "list_sources", map[string]any{"project_id": pid})
			require.Empty(t, errText)
			raw, _ := json.Marshal(listed)
			assert.NotContains(t, string(raw), password, "%s: list_sources never shows the password", who)
			one := listed["sources"].([]any)[0].(map[string]any)
			assert.Equal(t, map[string]any{"scheme": "basic", "username": "am", "secret_set": true}, one["verification"], who)
		}

		_, errText = tool(t, ms, "rotate_source_secret", map[string]any{"project_id": pid, "source_id": id})
		assert.Contains(t, errText, "forbidden", "a member cannot rotate")
		_, errText = tool(t, ss, "rotate_source_secret", map[string]any{"project_id": pid, "source_id": id})
		assert.Equal(t, "not_found: project not found", errText, "a stranger does not see the project")
		_, errText = tool(t, cs, "rotate_source_secret", map[string]any{"project_id": pid, "source_id": "src_0000000000000000"})
		assert.Contains(t, errText, "not_found")

		rotated, errText := tool(t, cs, "rotate_source_secret", map[string]any{"project_id": pid, "source_id": id})
		require.Empty(t, errText)
		newPassword := rotated["verification"].(map[string]any)["password"].(string)
		assert.NotEqual(t, password, newPassword)
		require.Eventually(t, func() bool {
			c := *mirrored(t, m, ingestKey).Verification
			return sourceverify.Verify(c, basicAuth("am", newPassword), "", nil, time.Now()) == nil &&
				sourceverify.Verify(c, basicAuth("am", password), "", nil, time.Now()) != nil
		}, time.Second, 10*time.Millisecond, "the old password stops working within a second")
		listed, _ := tool(t, cs, "list_sources", map[string]any{"project_id": pid})
		raw, _ = json.Marshal(listed)
		assert.NotContains(t, string(raw), newPassword)
	})
}
