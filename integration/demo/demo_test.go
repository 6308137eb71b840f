package main

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
	kf, demo := buildBoth(t, dir)
	httpAddr := freeAddr(t)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, demo, "--kfollower", kf, "--fast", "--http", httpAddr, "--dir", filepath.Join(dir, "demo"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
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

// Ctrl-C in the middle of the story stops it cleanly: kfollower with
// SIGTERM (exit 0), the cluster, and no JVM is left.
func TestDemoInterrupt(t *testing.T) {
	dir := t.TempDir()
	kf, demo := buildBoth(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	demoDir := filepath.Join(dir, "demo")
	cmd := exec.CommandContext(ctx, demo, "--kfollower", kf, "--fast", "--http", freeAddr(t), "--dir", demoDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Minute)
	for !strings.Contains(out.String(), "demo: step 1/7") {
		select {
		case err := <-waited:
			t.Fatalf("the demo ended (%v) before step 1:\n%s", err, tail(out.String(), 80))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-waited
			t.Fatalf("no step 1 within 10 minutes:\n%s", tail(out.String(), 80))
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("after Ctrl-C the demo exited with %v:\n%s", err, tail(out.String(), 80))
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-waited
		t.Fatalf("the demo still ran 2 minutes after Ctrl-C:\n%s", tail(out.String(), 80))
	}
	got := out.String()
	for _, w := range []string{"demo: interrupted", "demo: kfollower exited: exit status 0", "demo: stopped."} {
		if !strings.Contains(got, w) {
			t.Errorf("after Ctrl-C the output lacks %q:\n%s", w, tail(got, 80))
		}
	}
	if b, _ := exec.Command("pgrep", "-f", demoDir).Output(); len(strings.TrimSpace(string(b))) > 0 {
		t.Errorf("processes of the demo left after Ctrl-C: %s", b)
	}
}

func buildBoth(t *testing.T, dir string) (kf, demo string) {
	t.Helper()
	build := func(out, pkg string) string {
		p := filepath.Join(dir, out)
		if b, err := exec.Command("go", "build", "-o", p, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
		return p
	}
	return build("kfollower", "../../cmd/kfollower"), build("kfollower-demo", ".")
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer is a bytes.Buffer the process writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
