package main

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kfollower/kfollower/integration/kafka"
)

// TestMain kills any Kafka JVM a test left and checks for goroutine leaks.
func TestMain(m *testing.M) { kafka.Main(m) }

// The demo tells its story (in --fast mode, no pauses) against a real
// cluster and ends on its own with exit 0, and each step happened: the
// clean kill raised no loss, the unclean election's loss was logged with
// its exact offsets, counted in the metric, listed by lost list; verify
// matched; the console consumer read kfollower's copy over --serve; status
// showed it; kfollower and the cluster stopped.
func TestDemoStory(t *testing.T) {
	dir := t.TempDir()
	build := func(out, pkg string) string {
		p := filepath.Join(dir, out)
		if b, err := exec.Command("go", "build", "-o", p, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
		return p
	}
	kf := build("kfollower", "../../cmd/kfollower")
	demo := build("kfollower-demo", ".")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, demo, "--kfollower", kf, "--fast", "--http", httpAddr, "--dir", filepath.Join(dir, "demo"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	got := out.String()
	if err != nil {
		t.Fatalf("the demo failed: %v\n%s", err, tail(got, 120))
	}
	// Each, in this order.
	want := []string{
		"demo: step 1/7: a clean leader kill",
		"no alarm: kfollower reconciled with broker",
		"demo: step 2/7: an unclean election",
		`msg="truncated: committed data lost by the cluster" partition=demo-payments-0 from=300 to=420 records=120`,
		"demo: kfollower's loss line:",
		"reports 120 committed records lost at offsets [300..419]",
		"demo: step 3/7: the metric",
		`kfollower_committed_records_lost_total{topic="demo-orders"} 0`,
		`kfollower_committed_records_lost_total{topic="demo-payments"} 120`,
		"demo: step 4/7:",
		"$ kfollower lost list",
		"demo-payments-0",
		"[300..419]",
		"(exit status 0)",
		"demo: step 5/7:",
		"$ kfollower verify",
		"(exit status 0)",
		"demo: step 6/7: Kafka's console consumer",
		"Processed a total of 500 messages",
		"demo: 500 records",
		"demo: step 7/7:",
		"$ kfollower status",
		"LOSS: 120 committed records lost since start; latest demo-payments-0 offsets [300..419]",
		"demo: the story is told",
		"demo: kfollower exited: exit status 0",
		"demo: stopped.",
	}
	rest := got
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("the demo's output lacks %q (after the steps before it):\n%s", w, tail(got, 150))
		}
		rest = rest[i+len(w):]
	}
	// The clean kill reported nothing lost: the only loss line is the
	// unclean election's.
	n := 0
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, "  kfollower | ") && strings.Contains(l, "committed data lost by the cluster") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d loss lines, want 1 (the unclean election's):\n%s", n, tail(got, 150))
	}
	t.Log(tail(got, 60))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
