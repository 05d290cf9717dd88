package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// viaAPI is project creation the way a user does it, through the control plane's API on
// PostgreSQL: the path the mirror writes above skip.
type viaAPI struct {
	Projects int `json:"projects"`
	// Per project: POST /projects, PUT .../pipeline, POST .../sinks, POST .../keys.
	Seconds  float64        `json:"seconds"`
	PerSec   float64        `json:"projects_per_sec"`
	Project  benchkit.Dist  `json:"per_project"` // the four calls of one project
	Failures map[string]int `json:"failures"`
	Ready    ready          `json:"ready"` // from the first call
}

// controlPlane runs the control plane beside a fresh environment and creates n projects
// through its API, conc at a time, then waits until each accepts and consumes an event.
func controlPlane(r *benchkit.Runner, natsBin string, n, conc int, timeout time.Duration) viaAPI {
	e := newEnv(r, natsBin, conc)
	secret := make([]byte, 24)
	_, _ = rand.Read(secret)
	cp := testenv.StartControlPlane(r, map[string]string{
		"NATS_URL": e.nats.url(), "DATABASE_URL": testenv.PostgresURL(r), "SVC_DATA_DIR": r.TempDir(),
		"SVC_JWT_SECRET": hex.EncodeToString(secret), "SVC_OUTBOUND_ALLOW": "127.0.0.0/8",
		// One account creates every tenant, past the free tier's project limit.
		"SVC_MAX_PROJECTS_PER_ACCOUNT": "0",
	})
	// testenv builds the binary once per process into a directory of its own, ours to remove.
	bin := testenv.BuildPackage(r, "./controlplane")
	r.AtExit(func() { _ = os.RemoveAll(filepath.Dir(bin)) })
	waitReadyz(r, cp.URL)
	api := func(method, path, token string, body any) (int, map[string]any) {
		b, _ := json.Marshal(body)
		req, err := http.NewRequest(method, cp.URL+path, bytes.NewReader(b))
		if err != nil {
			r.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := e.client.Do(req)
		if err != nil {
			return 0, map[string]any{"error": map[string]any{"code": "no answer"}}
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return resp.StatusCode, out
	}
	status, signup := api(http.MethodPost, "/api/v1/auth/signup", "", map[string]string{"email": "tenants@bench.example", "password": "bench-password-1234"})
	token, _ := signup["token"].(string)
	if status != http.StatusCreated || token == "" {
		r.Fatalf("signup answered %d %v", status, signup)
	}

	res := viaAPI{Projects: n, Failures: map[string]int{}}
	e.projects = make([]project, n)
	var mu sync.Mutex
	var lat []time.Duration
	t0 := time.Now()
	e.each(func(i int, _ project) {
		start := time.Now()
		fail := func(step string, status int, body map[string]any) {
			code := ""
			if eb, ok := body["error"].(map[string]any); ok {
				code, _ = eb["code"].(string)
			}
			mu.Lock()
			res.Failures[fmt.Sprintf("%s %d %s", step, status, code)]++
			mu.Unlock()
		}
		status, p := api(http.MethodPost, "/api/v1/projects", token, map[string]string{"name": fmt.Sprintf("tenant %d", i)})
		id, _ := p["id"].(string)
		if status != http.StatusCreated || id == "" {
			fail("create project", status, p)
			return
		}
		if status, b := api(http.MethodPut, "/api/v1/projects/"+id+"/pipeline", token, map[string]any{"agent_endpoint_url": e.ag.URL + "/agent/" + id}); status != http.StatusOK {
			fail("put pipeline", status, b)
			return
		}
		if status, b := api(http.MethodPost, "/api/v1/projects/"+id+"/sinks", token, map[string]any{"kind": "webhook", "url": e.ag.URL + "/webhook/" + id}); status != http.StatusCreated {
			fail("create sink", status, b)
			return
		}
		status, k := api(http.MethodPost, "/api/v1/projects/"+id+"/keys", token, map[string]string{"name": "bench"})
		key, _ := k["key"].(string)
		if status != http.StatusCreated || key == "" {
			fail("create key", status, k)
			return
		}
		el := time.Since(start)
		mu.Lock()
		lat = append(lat, el)
		mu.Unlock()
		e.projects[i] = project{id: id, key: key} // each index is written by one goroutine only
	})
	res.Seconds = time.Since(t0).Seconds()
	res.PerSec = float64(len(lat)) / res.Seconds
	res.Project = benchkit.DistOf(lat)
	if len(lat) < n {
		r.Fatalf("%d of %d projects could not be created through the control plane: %v", n-len(lat), n, res.Failures)
	}
	res.Ready = e.ready(1, t0, timeout)
	return res
}

// waitReadyz waits until the control plane says it is ready (/readyz: NATS connected and
// the mirror published), as a user's deployment would before sending traffic. A control
// plane without /readyz (older commits) answers 404 and is taken as ready.
func waitReadyz(r *benchkit.Runner, base string) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNotFound {
			return
		}
	}
	r.Fatal("the control plane was not ready within a minute")
}
