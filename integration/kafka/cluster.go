package kafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Options shape a test cluster. The zero value is a Combined cluster of the
// default version.
type Options struct {
	Layout Layout
	// Features are feature levels fixed at format time, name → level, e.g.
	// "eligible.leader.replicas.version": 0 (docs/testing.md §6.8).
	Features map[string]int
	// Config overrides node properties on every node.
	Config map[string]string
	// NeedsFaults says the test kills, pauses or restarts nodes, so an
	// external cluster (KFOLLOWER_KAFKA_BOOTSTRAP) cannot serve it.
	NeedsFaults bool
	// ReadyTimeout bounds start-up; default 120 s.
	ReadyTimeout time.Duration
	// Security adds SSL and SASL listeners to the brokers (security.go).
	Security *Security
	// ExtraBrokers adds that many broker-only nodes (ids 4, 5, ...) beside
	// the layout's three brokers. They hold nothing until a test moves
	// partitions onto them (Reassign): a new broker joining the cluster.
	ExtraBrokers int
	// BrokerHeapMB is each broker JVM's maximum heap in MiB (-Xmx; -Xms
	// is half of it); 0 is 512. A broker holds per-partition state on the
	// heap (a Partition, its UnifiedLog and segments, replica fetcher
	// state): thousands of partitions need more (bench/scale_test.go).
	BrokerHeapMB int
	// StopTimeout bounds Stop's wait for a controlled shutdown before it
	// kills the node and fails the test; 0 is 60 s. A broker leading
	// 10,000 partitions on a loaded 2-core machine takes longer.
	StopTimeout time.Duration
}

// Cluster is a running test cluster: JVMs started by this process, or an
// external cluster named by KFOLLOWER_KAFKA_BOOTSTRAP.
type Cluster struct {
	t        testing.TB
	Dir      string
	Version  string
	nodes    []*Node // brokers first, in id order, then a controller-only node
	stopWait time.Duration
	external []string

	adminOnce sync.Once
	adminCl   *kgo.Client
}

// EnvDir names a directory to hold the clusters' nodes (their configs,
// logs and data) instead of the test's temp dir, for a benchmark that
// wants Kafka's disk apart from kfollower's: with it on a tmpfs, Kafka's
// own fsyncs (a broker writes a partition's leader-epoch-checkpoint as it
// takes over) no longer bound a leader move (bench/scale_test.go).
const EnvDir = "KFOLLOWER_KAFKA_DIR"

// clusterDir makes the directory a cluster's nodes live in: under EnvDir
// when set (removed with the test), else the test's temp dir.
func clusterDir(t testing.TB) (string, error) {
	parent := os.Getenv(EnvDir)
	if parent == "" {
		return t.TempDir(), nil
	}
	dir, err := os.MkdirTemp(parent, "kafka-")
	if err != nil {
		return "", fmt.Errorf("%s=%s: %w", EnvDir, parent, err)
	}
	// Registered before teardown, so it runs after the nodes have stopped.
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir, nil
}

// EnvBootstrap names an external cluster for tests that need no fault control.
const EnvBootstrap = "KFOLLOWER_KAFKA_BOOTSTRAP"

// Start runs a cluster for t and tears it down in t.Cleanup. It fails t,
// never skips it, when Kafka cannot be started.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if ext := os.Getenv(EnvBootstrap); ext != "" && !opts.NeedsFaults && opts.Security == nil && opts.ExtraBrokers == 0 {
		c := &Cluster{t: t, external: strings.Split(ext, ","), Version: "external"}
		t.Cleanup(c.closeAdmin)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := c.waitReady(ctx); err != nil {
			t.Fatalf("external Kafka cluster %s (from %s) is not ready: %v", ext, EnvBootstrap, err)
		}
		return c
	}
	c, err := start(t, opts)
	if err != nil {
		t.Fatalf("starting a Kafka %s cluster: %v", opts.Layout, err)
	}
	return c
}

func start(t testing.TB, opts Options) (*Cluster, error) {
	version := Version()
	rel, err := parseRelease(version)
	if err != nil {
		return nil, err
	}
	lib, err := EnsureJars(version)
	if err != nil {
		return nil, err
	}
	// One harness cluster at a time on this machine: go test runs packages
	// in parallel, and two clusters on 2 cores starve each other.
	waited := time.Now()
	release, err := lockFile(filepath.Join(filepath.Dir(lib), "..", "cluster.lock"))
	if err != nil {
		return nil, err
	}
	t.Cleanup(release)
	// Said, so that a test's time can be told from its wait for others.
	if d := time.Since(waited); d > time.Second {
		t.Logf("kafka harness: waited %v for the machine-wide cluster lock", d.Round(100*time.Millisecond))
	}
	dir, err := clusterDir(t)
	if err != nil {
		return nil, err
	}
	c := &Cluster{t: t, Dir: dir, Version: version, stopWait: opts.StopTimeout}
	if c.stopWait == 0 {
		c.stopWait = 60 * time.Second
	}
	// Registered before any JVM starts, so every later failure tears down.
	t.Cleanup(c.teardown)

	var ids []int32
	var ctl int32 = -1
	switch opts.Layout {
	case Combined:
		ids = []int32{1, 2, 3}
	case Isolated:
		ids, ctl = []int32{1, 2, 3}, ControllerID
	default:
		return nil, fmt.Errorf("unknown layout %d", opts.Layout)
	}
	extra := make(map[int32]bool, opts.ExtraBrokers)
	for range opts.ExtraBrokers {
		id := ids[len(ids)-1] + 1
		ids, extra[id] = append(ids, id), true
	}
	ports, err := freePorts(2*len(ids) + 1 + len(ids)*opts.Security.extraPorts())
	if err != nil {
		return nil, err
	}
	next := func() int { p := ports[0]; ports = ports[1:]; return p }
	for _, id := range ids {
		n := &Node{ID: id, broker: true, controller: opts.Layout == Combined && !extra[id], lib: lib, rel: rel, heapMB: opts.BrokerHeapMB}
		n.Port = next()
		if n.controller {
			n.ControllerPort = next()
		}
		opts.Security.assignPorts(n, next)
		c.nodes = append(c.nodes, n)
	}
	if ctl >= 0 {
		c.nodes = append(c.nodes, &Node{ID: ctl, controller: true, lib: lib, rel: rel, ControllerPort: next()})
	}
	var voters []string
	for _, n := range c.nodes {
		if n.controller {
			voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", n.ID, n.ControllerPort))
		}
	}
	var features []string
	for name, level := range opts.Features {
		features = append(features, fmt.Sprintf("%s=%d", name, level))
	}
	slices.Sort(features)

	for _, n := range c.nodes {
		n.Dir = filepath.Join(c.Dir, fmt.Sprintf("node%d", n.ID))
		n.config = filepath.Join(n.Dir, "server.properties")
		if err := os.MkdirAll(filepath.Join(n.Dir, "logs"), 0o755); err != nil {
			return nil, fmt.Errorf("creating %s: %w", n.Dir, err)
		}
		props := nodeProps(n, strings.Join(voters, ","), opts.Config)
		opts.Security.apply(n, props)
		if err := n.writeConfig(props); err != nil {
			return nil, err
		}
	}
	// Every node is formatted with the same cluster id and flags.
	if err := formatAll(filepath.Join(filepath.Dir(lib), "formatted"), version, c.nodes, features); err != nil {
		return nil, err
	}
	// All at once: a broker blocks in startup until the quorum has a leader,
	// which one voter alone cannot elect (docs/testing.md §6.2).
	for _, n := range c.nodes {
		if err := n.start(); err != nil {
			return nil, err
		}
	}
	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = 120 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := c.waitReady(ctx); err != nil {
		return nil, fmt.Errorf("cluster in %s not ready within %v: %w", c.Dir, timeout, err)
	}
	return c, nil
}

// Bootstrap is the list of broker addresses.
func (c *Cluster) Bootstrap() []string {
	if c.external != nil {
		return c.external
	}
	var addrs []string
	for _, n := range c.Brokers() {
		addrs = append(addrs, n.Addr())
	}
	return addrs
}

// Reachable is the addresses of the brokers that are up and not paused
// (all of Bootstrap for an external cluster, or when none is), for the
// test's own clients. A new franz-go client sends its first request to a
// random seed, and a SIGSTOPped broker's kernel still accepts the
// connection, so a seed list holding a paused broker stalled one client in
// three for its request timeout, 10-20 s (TestReconcileTwoRoundtrips took
// 25 s or 45 s by that draw). Bootstrap, which kfollower is given, keeps
// every broker: kfollower must cope with a paused seed itself.
func (c *Cluster) Reachable() []string {
	if c.external != nil {
		return c.external
	}
	var addrs []string
	for _, n := range c.Brokers() {
		if n.wantUp() && !n.isPaused() {
			addrs = append(addrs, n.Addr())
		}
	}
	if len(addrs) == 0 {
		return c.Bootstrap()
	}
	return addrs
}

// External reports whether the cluster was not started by this process.
func (c *Cluster) External() bool { return c.external != nil }

// Brokers are the broker nodes, in id order.
func (c *Cluster) Brokers() []*Node {
	var bs []*Node
	for _, n := range c.nodes {
		if n.broker {
			bs = append(bs, n)
		}
	}
	return bs
}

// Node returns the node with the given id; it fails the test if none.
func (c *Cluster) Node(id int32) *Node {
	c.t.Helper()
	c.needFaults("Node")
	for _, n := range c.nodes {
		if n.ID == id {
			return n
		}
	}
	c.t.Fatalf("no node %d in the cluster", id)
	return nil
}

func (c *Cluster) needFaults(op string) {
	c.t.Helper()
	if c.external != nil {
		c.t.Fatalf("%s needs a cluster started by the harness, not the external one from %s (set Options.NeedsFaults)", op, EnvBootstrap)
	}
}

// Client returns a kgo client for the cluster, seeded with the brokers
// reachable now (Reachable), closed when the test ends.
func (c *Cluster) Client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Reachable()...)}, opts...)...)
	if err != nil {
		c.t.Fatalf("creating a Kafka client: %v", err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client on one shared connection pool.
func (c *Cluster) Admin() *kadm.Client { return kadm.NewClient(c.adminClient()) }

// adminClient is the shared kgo client behind Admin, for raw kmsg requests.
func (c *Cluster) adminClient() *kgo.Client {
	c.adminOnce.Do(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Reachable()...), kgo.RetryTimeout(10*time.Second))
		if err != nil {
			c.t.Fatalf("creating an admin client: %v", err)
		}
		c.adminCl = cl
	})
	return c.adminCl
}

func (c *Cluster) closeAdmin() {
	if c.adminCl != nil {
		c.adminCl.Close()
	}
}

// waitReady waits until every broker answers Metadata listing every broker
// that should be up (docs/testing.md §6.6): a broker opens its listener only
// once it is caught up and unfenced. It fails fast when a JVM has exited.
func (c *Cluster) waitReady(ctx context.Context) error {
	return c.waitBrokers(ctx, c.Bootstrap(), len(c.Bootstrap()))
}

// waitReadyLive waits until each of the live brokers lists all of them.
func (c *Cluster) waitReadyLive(ctx context.Context, live []*Node) error {
	var addrs []string
	for _, n := range live {
		addrs = append(addrs, n.Addr())
	}
	return c.waitBrokers(ctx, addrs, len(addrs))
}

func (c *Cluster) waitBrokers(ctx context.Context, addrs []string, want int) error {
	var last error
	for _, addr := range addrs {
		for {
			if err := c.exited(); err != nil {
				return err
			}
			n, err := brokersSeenBy(ctx, addr)
			if err == nil && n >= want {
				break
			}
			if err == nil {
				err = fmt.Errorf("broker %s lists %d of %d brokers", addr, n, want)
			}
			last = err
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// exited reports a JVM that died although it should be running.
func (c *Cluster) exited() error {
	var errs []error
	for _, n := range c.nodes {
		if !n.wantUp() {
			continue
		}
		if err := n.exitErr(); err != nil {
			errs = append(errs, fmt.Errorf("%w; its log is %s", err, n.LogFile()))
		}
	}
	return errors.Join(errs...)
}

// brokersSeenBy asks exactly the broker at addr for Metadata.
func brokersSeenBy(ctx context.Context, addr string) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		return 0, fmt.Errorf("client for %s has %d seeds", addr, len(seeds))
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // brokers only
	resp, err := seeds[0].Request(rctx, req)
	if err != nil {
		return 0, fmt.Errorf("metadata from %s: %w", addr, err)
	}
	return len(resp.(*kmsg.MetadataResponse).Brokers), nil
}

// teardown kills every JVM and, when the test failed, puts the tail of each
// node's log into the test output.
func (c *Cluster) teardown() {
	c.closeAdmin()
	for _, n := range c.nodes {
		if err := n.kill(); err != nil {
			c.t.Errorf("teardown: %v", err)
		}
	}
	if c.t.Failed() {
		for _, n := range c.nodes {
			b, err := os.ReadFile(n.LogFile())
			if err != nil {
				c.t.Logf("node %d log %s: %v", n.ID, n.LogFile(), err)
				continue
			}
			c.t.Logf("---- node %d, last lines of %s ----\n%s", n.ID, n.LogFile(), tail(string(b), 60))
		}
	}
}
