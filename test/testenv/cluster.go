package testenv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSCluster is a NATS cluster of separate nats-server processes on loopback, built from
// the nats-server module in go.mod. Separate processes (not in-process servers) so that a
// node can be killed with SIGKILL like a crashed machine, without taking the test down.
type NATSCluster struct {
	Nodes []*NATSNode
}

// NATSNode is one server of a NATSCluster.
type NATSNode struct {
	t           T
	bin         string
	p           process
	Name        string // server name, n1..nN
	Port        int    // client port
	ClusterPort int    // route port
	HTTPPort    int    // monitoring port (/healthz)
	StoreDir    string // JetStream store, kept across restarts
	routes      string
	cluster     string
}

// StartNATSCluster starts n JetStream servers routed to each other and waits until the
// cluster has a JetStream meta leader, so streams with n replicas can be created. Every
// process is killed at the end of the test.
func StartNATSCluster(t T, n int) *NATSCluster {
	t.Helper()
	bin := BuildPackage(t, "github.com/nats-io/nats-server/v2")
	c := &NATSCluster{}
	// Every node's routes name every other node's port, so a port taken meanwhile starts
	// the whole cluster again on new ones.
	retryPorts(t, func() error {
		for _, node := range c.Nodes {
			node.Kill()
		}
		c.Nodes = nil
		var routes []string
		for i := 0; i < n; i++ {
			node := &NATSNode{
				t: t, bin: bin, Name: "n" + strconv.Itoa(i+1),
				Port: FreePort(t), ClusterPort: FreePort(t), HTTPPort: FreePort(t), StoreDir: t.TempDir(),
				cluster: "svc-test",
			}
			routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(node.ClusterPort))
			c.Nodes = append(c.Nodes, node)
		}
		// Registered after the store directories (t.TempDir), so it runs before they are
		// removed: a server still writing would leave them not empty.
		nodes := c.Nodes
		t.Cleanup(func() {
			for _, node := range nodes {
				node.Kill()
				if t.Failed() {
					t.Logf("nats-server %s log (last 4 KiB):\n%s", node.Name, tail(node.Log(), 4096))
				}
			}
		})
		for _, node := range c.Nodes {
			node.routes = strings.Join(routes, ",")
			if err := node.start(); err != nil {
				return err
			}
		}
		deadline := time.Now().Add(60 * time.Second)
		for _, node := range c.Nodes {
			if err := node.waitHealthy(time.Until(deadline)); err != nil {
				return err
			}
		}
		return nil
	})
	c.WaitReady(60 * time.Second)
	return c
}

// URL lists every node's client URL, comma-separated, as NATS_URL takes them.
func (c *NATSCluster) URL() string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.URL()
	}
	return strings.Join(urls, ",")
}

// Node returns the node with the given server name, nil if there is none.
func (c *NATSCluster) Node(name string) *NATSNode {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// WaitReady waits until every running node answers its health check (JetStream enabled
// and caught up with the meta group) and a JetStream API call succeeds, which needs a meta
// leader.
func (c *NATSCluster) WaitReady(within time.Duration) {
	c.Nodes[0].t.Helper()
	deadline := time.Now().Add(within)
	for _, n := range c.Nodes {
		if n.p.pid() != 0 {
			n.WaitHealthy(time.Until(deadline))
		}
	}
	nc, err := nats.Connect(c.URL(), nats.Timeout(5*time.Second))
	if err != nil {
		c.Nodes[0].t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		c.Nodes[0].t.Fatal(err)
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.Nodes[0].t.Fatalf("NATS cluster has no JetStream meta leader: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// URL is the node's client URL.
func (n *NATSNode) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(n.Port) }

// Start (re)starts the node on the same ports and store, as a machine coming back. It
// does not wait: call WaitHealthy (or the cluster's WaitReady).
func (n *NATSNode) Start() {
	n.t.Helper()
	if err := n.start(); err != nil {
		n.t.Fatal(err)
	}
}

func (n *NATSNode) start() error {
	return n.p.start(n.bin, []string{
		"-a", "127.0.0.1", "-p", strconv.Itoa(n.Port), "-m", strconv.Itoa(n.HTTPPort),
		"-n", n.Name, "-js", "-sd", n.StoreDir,
		"--cluster_name", n.cluster, "--cluster", "nats://127.0.0.1:" + strconv.Itoa(n.ClusterPort),
		"--routes", n.routes}, nil)
}

// WaitHealthy waits until the node's /healthz answers 200: it serves clients and its
// JetStream (meta group and assigned streams) has caught up.
func (n *NATSNode) WaitHealthy(within time.Duration) {
	n.t.Helper()
	if err := n.waitHealthy(within); err != nil {
		n.t.Fatal(err)
	}
}

func (n *NATSNode) waitHealthy(within time.Duration) error {
	url := "http://127.0.0.1:" + strconv.Itoa(n.HTTPPort) + "/healthz"
	return n.p.waitReady("nats-server "+n.Name, within, 100*time.Millisecond, func() bool { return answers200(url) })
}

// Kill ends the node with SIGKILL, as a crash would; its store stays for a restart.
func (n *NATSNode) Kill() { n.p.kill() }

// Log returns what the node printed.
func (n *NATSNode) Log() string { return n.p.Log() }

// String names the node in test output.
func (n *NATSNode) String() string { return fmt.Sprintf("%s (%s)", n.Name, n.URL()) }
