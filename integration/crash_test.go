package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kgo"
)

const childEnv = "KFOLLOWER_TEST_CHILD" // "bootstrap|dataDir|topic"

// runChild follows one topic until SIGTERM (or SIGKILL), logging JSON to
// stdout. Small fetches and an fsync per append make catch-up slow enough
// to be killed in the middle. It fetches on its own connections, as the
// binary does, so a kill may land while a response's batches are staged
// past a segment's end (storage.Log.Stage): the restart must cut them.
func runChild() int {
	parts := strings.Split(os.Getenv(childEnv), "|")
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(parts[0], ",")...))
	if err != nil {
		log.Error("client", "err", err)
		return 1
	}
	defer cl.Close()
	m, err := fetcher.New(fetcher.Config{
		Client: cl, DataDir: parts[1], Logger: log,
		Follow:           func(t string) bool { return t == parts[2] },
		Storage:          storage.Options{Flush: storage.FlushEveryAppend},
		Limits:           wire.FetchLimits{MaxWaitMillis: 100, MinBytes: 1, MaxBytes: 256 << 10, PartitionMaxBytes: 64 << 10},
		MetadataInterval: time.Second,
		DirectFetch:      testDirectFetch(),
	})
	if err != nil {
		log.Error("fetcher", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := m.Run(ctx); err != nil {
		log.Error("run", "err", err)
		return 1
	}
	return 0
}

// kfollower is SIGKILLed three times while catching up and restarted on its
// data: each time it reconciles and resumes from its log end, never from
// zero, and the final log is a byte-exact prefix of the leader's: no gap, no
// duplicate (docs/design.md promise 4).
func TestKilledDuringCatchUp(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{NeedsFaults: true})
	const topic = "catchup"
	c.CreateTopic(ctx, topic, [][]int32{{1, 2, 3}, {2, 3, 1}}, nil)
	pad := strings.Repeat("p", 400)
	for p := int32(0); p < 2; p++ {
		produceTo(ctx, t, c, topic, p, pad, 20_000, kgo.ProducerBatchCompression(kgo.NoCompression()))
	}
	total := [2]int64{}
	for p := int32(0); p < 2; p++ {
		total[p] = int64(len(readSegments(t, filepath.Join(c.Node(mustLeader(ctx, t, c, topic, p)).DataDir(), fmt.Sprintf("%s-%d", topic, p)))))
	}
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var outs []string
	start := func(run int) (*exec.Cmd, string) {
		out := filepath.Join(t.TempDir(), fmt.Sprintf("run%d.log", run))
		outs = append(outs, out)
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(c.Bootstrap(), ",")+"|"+dir+"|"+topic)
		cmd.Stdout, cmd.Stderr = f, f
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, out
	}
	size := func(p int32) int64 { return int64(len(readSegments(t, storage.PartitionDir(dir, topic, p)))) }

	for run, target := range []int64{total[0] / 4, total[0] / 2, total[0] * 3 / 4} {
		cmd, out := start(run)
		if run > 0 {
			checkResumedSoon(t, out)
		}
		waitFor(t, fmt.Sprintf("partition 0 to reach %d bytes", target), func() bool { return size(0) >= target })
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		t.Logf("run %d SIGKILLed with %d of %d and %d of %d bytes copied", run, size(0), total[0], size(1), total[1])
	}
	cmd, out := start(3)
	checkResumedSoon(t, out)
	waitFor(t, "catch-up", func() bool { return size(0) == total[0] && size(1) == total[1] })
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kfollower child after SIGTERM: %v", err)
	}
	for p := int32(0); p < 2; p++ {
		compareWithLeader(ctx, t, c, dir, topic, p)
	}
	// How often a kill found batches staged and not yet appended (the
	// restart cut them as a torn tail): it depends on where the kill fell.
	torn := 0
	for _, out := range outs {
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		torn += strings.Count(string(b), "cutting a torn tail")
	}
	t.Logf("torn tails cut on restart: %d", torn)
}

func mustLeader(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string, p int32) int32 {
	t.Helper()
	return c.WaitPartition(ctx, topic, p, "a leader", func(s kafka.PartitionState) bool { return s.Leader >= 0 }).Leader
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: timed out", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkResumedSoon waits for the restarted child to log that it opened
// catchup-0, the partition the test measures, and asserts it did so with
// data: it resumed from its log end, not from zero. Another partition's
// line may come first (metadata lists partitions in no set order).
func checkResumedSoon(t *testing.T, out string) {
	t.Helper()
	var logEnd int64
	waitFor(t, "the restarted kfollower to open catchup-0", func() bool {
		var ok bool
		logEnd, ok = openedAt(t, out, "catchup-0")
		return ok
	})
	if logEnd <= 0 {
		t.Fatalf("restarted kfollower opened catchup-0 at log end %d: it started from zero", logEnd)
	}
}

// openedAt returns the log end of the child's "following partition" line
// for partition, if it has logged one.
func openedAt(t *testing.T, out, partition string) (int64, bool) {
	t.Helper()
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			Msg       string `json:"msg"`
			Partition string `json:"partition"`
			LogEnd    int64  `json:"log_end"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "following partition" && l.Partition == partition {
			return l.LogEnd, true
		}
	}
	return 0, false
}
