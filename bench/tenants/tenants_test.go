package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
)

// A dump as the Go runtime prints it on SIGQUIT (Go 1.26), shortened.
const sigquitDump = `SIGQUIT: quit
PC=0x481021 m=0 sigcode=0

goroutine 0 gp=0x584340 m=0 mp=0x585100 [idle]:
runtime.futex(0x585258, 0x80, 0x0, 0x0, 0x0, 0x0)
	/usr/local/go/src/runtime/sys_linux_amd64.s:557 +0x21 fp=0x7ffd4b1e1b48 sp=0x7ffd4b1e1b40 pc=0x481021

goroutine 1 gp=0x1603a73661e0 m=nil [sleep]:
runtime.gopark(0x3a21735fd63?, 0x1603a7406028?, 0x20?, 0x40?, 0x10?)
	/usr/local/go/src/runtime/proc.go:462 +0xce fp=0x1603a735fe88 sp=0x1603a735fe68 pc=0x47964e
main.main()
	/tmp/gq/main.go:16 +0x9a fp=0x1603a735ff50 sp=0x1603a735ff28 pc=0x4a3f3a

goroutine 2 gp=0x1603a7366780 m=nil [force gc (idle)]:
runtime.gopark(0x0?, 0x0?, 0x0?, 0x0?, 0x0?)

goroutine 18 gp=0x1603a74201e0 m=nil [select, 3 minutes]:
main.main.func1()
	/tmp/gq/main.go:12 +0x1a fp=0x1603a7421fe0 sp=0x1603a7421fc8 pc=0x4a3fba
created by main.main in goroutine 1
	/tmp/gq/main.go:11 +0x2e

rax    0xfffffffffffffffc
`

func TestCountGoroutinesOfASigquitDump(t *testing.T) {
	if n := countGoroutines(sigquitDump); n != 3 {
		t.Errorf("counted %d goroutines, want 3 (1, 2 and 18; goroutine 0 is the signal stack)", n)
	}
	if n := countGoroutines("collector started\ncreated by main.main in goroutine 1\n"); n != 0 {
		t.Errorf("a log without a dump counted %d goroutines", n)
	}
}

func TestAgentCountsEachProjectOncePerRound(t *testing.T) {
	r := benchkit.NewRunner("test")
	defer r.Cleanups()
	a := startAgent(r)
	post := func(path, body string) int {
		t.Helper()
		resp, err := http.Post(a.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	post("/agent/p1", `[{"bench":"tenants","round":1}]`)
	post("/agent/p1", `[{"bench":"tenants","round":1}]`) // redelivered
	post("/agent/p2", `[{"bench":"tenants","round":1},{"bench":"hot","seq":7,"sent_ns":1}]`)
	post("/agent/p2", `[{"bench":"hot","seq":7,"sent_ns":1}]`)
	post("/agent/p1", `[{"bench":"tenants","round":2}]`)
	if got, _ := a.reachedRound(1); got != 2 {
		t.Errorf("round 1 reached by %d projects, want 2 (a redelivery is not another project)", got)
	}
	if got, _ := a.reachedRound(2); got != 1 {
		t.Errorf("round 2 reached by %d projects, want 1", got)
	}
	if h := a.hotArrivals(); len(h) != 1 || h[7].dup != 1 {
		t.Errorf("hot arrivals %+v, want seq 7 once with one duplicate", h)
	}
	if code := post("/agent/p1", `{"not":"an array"}`); code != http.StatusBadRequest || a.invalid.Load() != 1 {
		t.Errorf("a body that is not a batch: %d, invalid %d", code, a.invalid.Load())
	}
}

func TestDuCountsFilesAndBlocks(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "jetstream", "s1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "jetstream", "s1", "1.blk"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "meta.inf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	files, mib := du(dir)
	// A written MiB occupies at least a MiB of blocks; an empty file none.
	if files != 2 || mib < 1 || mib > 1.1 {
		t.Errorf("du = %d files, %.3f MiB; want 2 files, ~1 MiB", files, mib)
	}
}

func TestMetricReadsTheCollectorsExposition(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("# HELP otelcol_process_runtime_heap_alloc_bytes Bytes of allocated heap objects\n" +
			"# TYPE otelcol_process_runtime_heap_alloc_bytes gauge\n" +
			"otelcol_process_runtime_heap_alloc_bytes_total 1\n" +
			"otelcol_process_runtime_heap_alloc_bytes 4.334328e+06\n"))
	}))
	defer srv.Close()
	if v, err := metric(srv.URL, "otelcol_process_runtime_heap_alloc_bytes"); err != nil || v != 4334328 {
		t.Errorf("metric = %v, %v; want 4334328", v, err)
	}
	if _, err := metric(srv.URL, "otelcol_process_memory_rss"); err == nil {
		t.Error("no error for a metric the exposition does not have")
	}
}

// The server-only phase's configuration must give nats-server k accounts that each have
// JetStream and a user, or the phase would measure one account however many it names.
func TestAccountsConfigAsNATSServerReadsIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "accounts.conf")
	if err := os.WriteFile(path, []byte(accountsConfig(3)), 0o644); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opts.Host, opts.Port, opts.JetStream, opts.StoreDir, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, t.TempDir(), true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	users := map[string]string{}
	for _, u := range opts.Users {
		users[u.Username] = u.Account.Name
	}
	for i := range 3 {
		name := "T" + strconv.Itoa(i)
		if acc, err := s.LookupAccount(name); err != nil || !acc.JetStreamEnabled() {
			t.Errorf("account %s: JetStream not enabled (%v)", name, err)
		}
		if users["u"+strconv.Itoa(i)] != name {
			t.Errorf("user u%d is in account %q, want %s", i, users["u"+strconv.Itoa(i)], name)
		}
	}
	if ks, err := parseAccounts("1, 16"); err != nil || len(ks) != 2 || ks[1] != 16 {
		t.Errorf("parseAccounts(1, 16) = %v, %v", ks, err)
	}
	for _, bad := range []string{"", "0", "x", "1,,2"} {
		if _, err := parseAccounts(bad); err == nil {
			t.Errorf("parseAccounts(%q) accepted", bad)
		}
	}
}

// The live heap comes from the runtime's MemStats that the heap endpoint appends to its
// debug=1 text; a heap without the line must not read as 0 MiB.
func TestParseHeapAlloc(t *testing.T) {
	text := "heap profile: 1: 2 [3: 4] @ heap/1048576\n# runtime.MemStats\n# Alloc = 1\n# HeapAlloc = 23068672\n# HeapSys = 40000000\n"
	if got, err := parseHeapAlloc(text); err != nil || got != 22 {
		t.Errorf("parseHeapAlloc = %v, %v; want 22 MiB", got, err)
	}
	if _, err := parseHeapAlloc("heap profile: 1: 2 [3: 4] @ heap/1048576\n"); err == nil {
		t.Error("a text without HeapAlloc gave a figure")
	}
}
