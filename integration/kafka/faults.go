package kafka

import (
	"context"
	"syscall"
)

// Fault controls. Each fails the test on error, and each needs a cluster the
// harness started.

// wantUp reports whether the node should be running: not killed or stopped
// by the test since its last start.
func (n *Node) wantUp() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.down
}

func (n *Node) setDown(down bool) {
	n.mu.Lock()
	n.down = down
	n.paused = false // a killed or stopped process is no longer paused
	n.mu.Unlock()
}

// Kill SIGKILLs node id (a crash) and waits until the process is gone.
func (c *Cluster) Kill(id int32) {
	c.t.Helper()
	n := c.Node(id)
	n.setDown(true)
	if err := n.kill(); err != nil {
		c.t.Fatal(err)
	}
}

// Stop SIGTERMs node id (a controlled shutdown: leadership moves first) and
// waits for it to exit (Options.StopTimeout, killing it after). It needs a
// live metadata quorum.
func (c *Cluster) Stop(id int32) {
	c.t.Helper()
	n := c.Node(id)
	n.setDown(true)
	if err := n.stop(c.stopWait); err != nil {
		c.t.Fatal(err)
	}
}

// Pause SIGSTOPs node id: it stops fetching and heartbeating, so it leaves
// the ISR and is fenced (docs/testing.md §6.8).
func (c *Cluster) Pause(id int32) {
	c.t.Helper()
	n := c.Node(id)
	if _, err := n.signal(syscall.SIGSTOP); err != nil {
		c.t.Fatal(err)
	}
	n.setPaused(true)
}

// Resume SIGCONTs a paused node.
func (c *Cluster) Resume(id int32) {
	c.t.Helper()
	n := c.Node(id)
	if _, err := n.signal(syscall.SIGCONT); err != nil {
		c.t.Fatal(err)
	}
	n.setPaused(false)
}

func (n *Node) setPaused(p bool) {
	n.mu.Lock()
	n.paused = p
	n.mu.Unlock()
}

func (n *Node) isPaused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// Restart starts a killed or stopped node again on the same log dir and,
// for a broker, waits until every live broker lists it.
func (c *Cluster) Restart(ctx context.Context, id int32) {
	c.t.Helper()
	n := c.Node(id)
	if err := n.start(); err != nil {
		c.t.Fatal(err)
	}
	n.setDown(false)
	if !n.broker {
		return
	}
	var live []*Node
	for _, b := range c.Brokers() {
		if b.wantUp() {
			live = append(live, b)
		}
	}
	if err := c.waitReadyLive(ctx, live); err != nil {
		c.t.Fatalf("node %d restarted but not ready: %v", id, err)
	}
}
