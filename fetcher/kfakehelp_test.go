package fetcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The set-up the tests against kfake share: a cluster, a Manager on it,
// Run until stop, and a wait for the copy.

// newKfake is a kfake cluster of opts, closed when the test ends (after
// the Managers startManager runs on it have stopped: cleanups run last
// registered first).
func newKfake(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// kfakeManager is a Manager of cfg whose Client is a new client on c's
// brokers (with opts), not yet run: a test may set what it watches
// (Manager.buffers, an observer's Manager) before startManager runs it.
func kfakeManager(t *testing.T, c *kfake.Cluster, cfg Config, opts ...kgo.Opt) *Manager {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Client = cl
	m, err := New(cfg)
	if err != nil {
		cl.Close()
		t.Fatal(err)
	}
	return m
}

// startManager runs m, of kfakeManager, until stop, which ends Run and
// returns its error once every worker has ended, then closes m's client;
// the test's cleanup stops it too.
func startManager(t *testing.T, m *Manager) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() { cancel(); runErr = <-done; m.cfg.Client.Close() })
		return runErr
	}
	t.Cleanup(func() { stop() })
	return stop
}

// waitCopied waits until the statuses of parts partitions add up to want
// records, failing after a deadline, and at once on a partition stopped
// or failed: neither copies more here (a stopped one waits for an
// operator; these tests' disks do not fail).
func waitCopied(t *testing.T, m *Manager, parts int, want int64, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var sum int64
		ss := m.Statuses()
		for _, s := range ss {
			sum += s.LogEndOffset
		}
		if len(ss) == parts && sum == want {
			return
		}
		for _, s := range ss {
			if s.State == "stopped" || s.State == "failed" {
				t.Fatalf("%s: %s-%d %s: %s", what, s.Topic, s.Partition, s.State, s.Error)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want %d records copied, statuses %+v", what, want, ss)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
