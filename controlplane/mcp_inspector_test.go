package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The MCP Inspector CLI (@modelcontextprotocol/inspector, pinned in
// testdata/inspector/package.json; `make inspector` installs it), a client no one here
// wrote, against the real control plane:
//   - without a header: a 401 whose WWW-Authenticate names the protected-resource
//     metadata, which the Inspector fetches and which answers;
//   - with a personal access token as header: tools/list (portable schemas: --strict
//     finds no problem) and tools/call list_projects;
//   - after the token is revoked, the very next call fails.
//
// It needs Node: without node and npm it is skipped, except under CI=true.
func TestMCPInspectorCLI(t *testing.T) {
	inspector := installInspector(t)
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	login, _ := s.signup(t, "inspector@example.com")
	pid := call(t, s.cp.URL, "POST", "/api/v1/projects", login, map[string]string{"name": "inspected"}).str("id")
	tok := call(t, s.cp.URL, "POST", "/api/v1/tokens", login, map[string]any{"name": "inspector", "expires_in_days": 1})
	require.Equal(t, http.StatusCreated, tok.Status, "%s", tok.Raw)
	pat := tok.str("token")

	// A recording proxy in front of the control plane shows what the Inspector was
	// answered. It keeps the Host header, so the URLs the control plane names lead back
	// through it.
	rec := &exchanges{}
	target, err := url.Parse(s.cp.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		rec.add(exchange{method: resp.Request.Method, path: resp.Request.URL.Path, status: resp.StatusCode,
			challenge: resp.Header.Get("WWW-Authenticate")})
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	endpoint := front.URL + "/mcp"
	metadata := front.URL + "/.well-known/oauth-protected-resource/mcp"

	// Without a header: the Inspector is told authorization is required, by a 401 that
	// names the metadata document, and the document answers.
	out, errOut, code := inspector.run(t, endpoint, "--method", "tools/list")
	assert.NotZero(t, code, "no token, no tools: %s %s", out, errOut)
	assert.Contains(t, out+errOut, "auth_required", "the Inspector took the answer for an authorization challenge")
	unauth := rec.find("POST", "/mcp")
	require.NotNil(t, unauth, "the Inspector called /mcp: %s %s", out, errOut)
	assert.Equal(t, http.StatusUnauthorized, unauth.status)
	assert.Equal(t, `Bearer resource_metadata="`+metadata+`"`, unauth.challenge)
	doc := call(t, front.URL, "GET", "/.well-known/oauth-protected-resource/mcp", "", nil)
	require.Equal(t, http.StatusOK, doc.Status, "%s", doc.Raw)
	assert.Equal(t, endpoint, doc.str("resource"))
	assert.Equal(t, []any{"header"}, doc.Body["bearer_methods_supported"])

	// With a personal access token as header: the tools, with portable schemas (--strict
	// reports any finding, warnings included, as schemaFindings), and a call.
	header := "Authorization: Bearer " + pat
	out, errOut, code = inspector.run(t, endpoint, "--header", header, "--method", "tools/list", "--strict")
	require.Zero(t, code, "%s %s", out, errOut)
	var listed struct {
		Result struct {
			Tools []struct{ Name string }
		}
		SchemaFindings []any
	}
	require.NoError(t, json.Unmarshal([]byte(out), &listed), "%s", out)
	var names []string
	for _, tl := range listed.Result.Tools {
		names = append(names, tl.Name)
	}
	assert.Subset(t, names, []string{"list_projects", "create_source", "test_source", "get_console_token",
		"console_recent_events", "console_fields", "console_dry_run", "console_deliveries", "console_delivery",
		"console_ledger", "console_trace", "console_replay"})
	assert.Empty(t, listed.SchemaFindings, "the Inspector finds every schema portable")
	assert.NotContains(t, errOut, "portability")

	out, errOut, code = inspector.run(t, endpoint, "--header", header, "--method", "tools/call", "--tool-name", "list_projects")
	require.Zero(t, code, "%s %s", out, errOut)
	assert.Contains(t, out, pid)
	assert.Contains(t, out, "inspected")

	// Revoked: the very next call is refused.
	require.Equal(t, http.StatusNoContent, call(t, s.cp.URL, "DELETE", "/api/v1/tokens/"+tok.str("id"), login, nil).Status)
	rec.reset()
	out, errOut, code = inspector.run(t, endpoint, "--header", header, "--method", "tools/call", "--tool-name", "list_projects")
	assert.NotZero(t, code, "a revoked token calls no tool: %s %s", out, errOut)
	assert.NotContains(t, out, pid)
	refused := rec.find("POST", "/mcp")
	require.NotNil(t, refused, "%s %s", out, errOut)
	assert.Equal(t, http.StatusUnauthorized, refused.status)
	assert.Equal(t, `Bearer resource_metadata="`+metadata+`"`, refused.challenge)
}

type inspectorCLI struct {
	bin  string
	home string
}

// installInspector installs the pinned Inspector (make inspector, a no-op when the
// lockfile has not changed) and returns how to run it.
func installInspector(t *testing.T) inspectorCLI {
	t.Helper()
	ci := os.Getenv("CI") == "true"
	for _, tool := range []string{"node", "npm", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			if ci {
				t.Fatalf("the MCP Inspector check needs %s (CI=true: not skipped): %v", tool, err)
			}
			t.Skipf("the MCP Inspector check needs %s: %v", tool, err)
		}
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", root, "inspector")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("make inspector (npm ci in controlplane/testdata/inspector): %v\n%s", err, out)
	}
	bin := filepath.Join(root, "controlplane", "testdata", "inspector", "node_modules", ".bin", "mcp-inspector")
	_, err = os.Stat(bin)
	require.NoError(t, err, "make inspector installed no mcp-inspector")
	// Its own state (OAuth stores, catalogs) goes to a home of its own, never the user's.
	return inspectorCLI{bin: bin, home: t.TempDir()}
}

// run runs the Inspector CLI against endpoint and returns its standard output (one JSON
// object: --format json), its standard error and its exit code. It never waits for a
// person: --stored-auth-only makes a server that wants OAuth an error.
func (c inspectorCLI) run(t *testing.T, endpoint string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	// Node's HTTP client now and then finds a kept-alive connection of the test's
	// recording proxy closed under it ("other side closed": the request got no answer at
	// all, CI saw it once in eight runs). Like any client, the Inspector is then run
	// again; an answer of the control plane, a 401 included, is never retried.
	for attempt := 1; ; attempt++ {
		stdout, stderr, code = c.runOnce(t, endpoint, args...)
		if code == 0 || attempt == 3 || !strings.Contains(stdout+stderr, "other side closed") {
			return stdout, stderr, code
		}
		t.Logf("the Inspector's connection was closed before an answer (attempt %d); running it again: %s", attempt, stdout+stderr)
	}
}

func (c inspectorCLI) runOnce(t *testing.T, endpoint string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--cli", endpoint, "--transport", "http", "--stored-auth-only", "--format", "json",
		"--connect-timeout", "20000"}, args...)
	cmd := exec.CommandContext(ctx, c.bin, all...)
	cmd.Env = append(os.Environ(), "HOME="+c.home, "MCP_CATALOG_PATH="+filepath.Join(c.home, "mcp.json"),
		"MCP_CLIENT_CONFIG_PATH="+filepath.Join(c.home, "client.json"), "NO_COLOR=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "the Inspector did not finish: %s %s", out.String(), errOut.String())
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), errOut.String(), code
}

type exchange struct {
	method, path string
	status       int
	challenge    string
}

// exchanges are the requests the proxy passed and their answers.
type exchanges struct {
	mu   sync.Mutex
	list []exchange
}

func (e *exchanges) add(x exchange) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, x)
}

func (e *exchanges) reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = nil
}

// find returns the first exchange of method and path.
func (e *exchanges) find(method, path string) *exchange {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, x := range e.list {
		if x.method == method && x.path == path {
			return &x
		}
	}
	return nil
}
