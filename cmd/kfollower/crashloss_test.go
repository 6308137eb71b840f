package main

import (
	"bytes"
	"context"
	be "encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/storage"
)

// TestCrashDuringLossSave runs the real binary against a real cluster
// through an unclean election that loses n2 committed records, and SIGKILLs
// it at each step of the save/truncate sequence (storage.Log.TruncateWithLost,
// docs/storage-format.md §9, §11), then restarts it. After the restart
// there is exactly one complete lost+found event for the loss, byte-equal
// to the batches the old leader held and the new one lacks; the loss was
// reported exactly once across both runs (one log line with its lost_id,
// the committed-records-lost counter at n2 in total) and /status names it.
//
// The kills must not depend on the machine's speed, so the sequence is held
// at the step rather than raced: before the election the test puts a FIFO
// where storage will open a small file's temporary copy (writeFileAtomic
// opens <name>.tmp for writing, which blocks on a FIFO with no reader), so
// the process cannot get past that step, then kills it once the files of
// the step before have appeared:
//
//   - copy: the intent's <name>.tmp is a FIFO; kill as soon as the event's
//     <event>.tmp directory appears: mid-copy, or at latest with the copy
//     complete and no intent.
//   - lost.json: the same FIFO; kill once <event>.tmp/lost.json exists:
//     the copy complete and durable, no intent (issue: two events for one
//     loss).
//   - truncated: kfollower-unreported-losses' <name>.tmp is a FIFO; kill
//     once the intent and the renamed event exist: the truncation durable,
//     the loss not yet listed nor reported (issue: a loss completed by
//     recovery is never reported).
//   - reported: no FIFO; kill once /status shows the loss and the list of
//     unreported losses is gone: the whole unit done.
//
// Two points cannot be held this way, since no file is opened there: the
// instant between the intent and the rename (the nearest held point is
// "truncated", just after it), and the instant between the report and
// MarkReported (the nearest is "reported"). A kill there repeats the
// report after the restart with the same id, as README says.
func TestCrashDuringLossSave(t *testing.T) {
	ctx := context.Background()
	bin := binary(t)
	c := kafka.Start(t, kafka.Options{Layout: kafka.Isolated, NeedsFaults: true})
	const a, b = int32(1), int32(2)
	for _, step := range []string{"copy", "lost.json", "truncated", "reported"} {
		ok := t.Run(step, func(t *testing.T) { crashLossStep(ctx, t, bin, c, a, b, step) })
		// The next step needs a again (b is the leader now).
		c.Restart(ctx, a)
		if !ok {
			return
		}
	}
}

func crashLossStep(ctx context.Context, t *testing.T, bin string, c *kafka.Cluster, a, b int32, step string) {
	const n1, n2 = 300, 120
	topic := "crash-" + strings.ReplaceAll(step, ".", "-")
	c.CreateTopic(ctx, topic, [][]int32{{a, b}}, map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "false"})
	data := t.TempDir()
	partDir := storage.PartitionDir(data, topic, 0)
	lostDir := storage.LostFoundDir(data, topic, 0)
	args := []string{"--bootstrap-servers", strings.Join(c.Bootstrap(), ","), "--topics", topic, "--data-dir", data, "--metadata-interval", "1s"}
	d1 := startDaemon(t, bin, nil, args...)
	produce(ctx, t, c, topic, 0, "n1", n1)
	waitStatus(t, d1, topic, 0, "n1 copied", func(s fetcher.Status) bool { return s.LogEndOffset == n1 })
	c.Pause(b)
	c.WaitPartition(ctx, topic, 0, "ISR [A]", func(st kafka.PartitionState) bool { return kafka.SameSet(st.ISR, []int32{a}) })
	produce(ctx, t, c, topic, 0, "n2", n2)
	waitStatus(t, d1, topic, 0, "n2 copied", func(s fetcher.Status) bool { return s.LogEndOffset == n1+n2 })

	var fifo string
	switch step {
	case "copy", "lost.json":
		fifo = filepath.Join(partDir, "kfollower-truncation-intent.tmp")
	case "truncated":
		fifo = filepath.Join(partDir, "kfollower-unreported-losses.tmp")
	}
	if fifo != "" {
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	c.Kill(a)
	c.WaitPartition(ctx, topic, 0, "no leader", func(st kafka.PartitionState) bool { return st.Leader == -1 })
	c.Resume(b)
	if el := c.ElectUnclean(ctx, topic, 0); el.Leader != b {
		t.Fatalf("unclean election chose %v, want leader %d", el, b)
	}
	// What the cluster lost: a's batches from n1 on (a is down, its log
	// untouched; b never had them).
	lostBatches := batchesFrom(t, readSegments(t, filepath.Join(c.Node(a).DataDir(), topic+"-0")), n1)

	var d1Lost float64
	switch step {
	case "copy":
		waitFile(t, d1, "the event's temporary directory", func() bool { return len(glob(t, filepath.Join(lostDir, "*.tmp"))) > 0 })
	case "lost.json":
		waitFile(t, d1, "lost.json in the temporary directory", func() bool { return len(glob(t, filepath.Join(lostDir, "*.tmp", "lost.json"))) > 0 })
	case "truncated":
		waitFile(t, d1, "the intent and the renamed event", func() bool {
			return exists(filepath.Join(partDir, "kfollower-truncation-intent")) && len(eventDirs(t, lostDir)) > 0
		})
	case "reported":
		waitStatus(t, d1, topic, 0, "the loss reported", func(s fetcher.Status) bool { return s.LastLost != nil })
		waitFile(t, d1, "the loss marked reported", func() bool { return !exists(filepath.Join(partDir, "kfollower-unreported-losses")) })
		d1Lost = value(scrape(t, d1), "kfollower_committed_records_lost_total", map[string]string{"topic": topic})
	}
	if err := d1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d1.done
	t.Logf("killed at %s; left: %s", step, strings.Join(listTree(t, data, partDir, lostDir), " "))
	if fifo != "" {
		// The test's own file: gone before the restart, so that nothing
		// blocks on it again.
		if err := os.Remove(fifo); err != nil {
			t.Fatal(err)
		}
	}

	d2 := startDaemon(t, bin, nil, args...)
	st := waitStatus(t, d2, topic, 0, "reconciled with b, the loss settled", func(s fetcher.Status) bool {
		return s.Reconciled && s.State == "fetching" && s.LogEndOffset == n1 && !exists(filepath.Join(partDir, "kfollower-unreported-losses"))
	})
	d2Lost := value(scrape(t, d2), "kfollower_committed_records_lost_total", map[string]string{"topic": topic})
	if code, _ := d2.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}

	// One complete event, nothing partial, byte-equal to what was lost.
	evs := eventDirs(t, lostDir)
	if all := glob(t, filepath.Join(lostDir, "*")); len(evs) != 1 || len(all) != 1 {
		t.Fatalf("lost+found of %s-0 holds %v, want exactly one complete event", topic, all)
	}
	lost, err := storage.ReadLost(evs[0])
	if err != nil {
		t.Fatal(err)
	}
	var saved []byte
	for _, seg := range lost.Segments {
		saved = append(saved, readFile(t, filepath.Join(lost.Dir, seg))...)
	}
	if !bytes.Equal(saved, lostBatches) || lost.From != n1 || lost.EndOffset != n1+n2 || lost.Records != n2 || lost.Cause == "" {
		t.Fatalf("event %s: %d bytes [%d,%d) %d records cause %q; want the %d bytes of a's batches [%d,%d), %d records, with a cause",
			lost.ID, len(saved), lost.From, lost.EndOffset, lost.Records, lost.Cause, len(lostBatches), n1, n1+n2, n2)
	}

	// Reported exactly once across both runs, with the event's id.
	logs := d1.stderr() + d2.stderr()
	if n := strings.Count(logs, "truncated: committed data lost by the cluster"); n != 1 || !strings.Contains(logs, "lost_id="+lost.ID) {
		t.Fatalf("%d loss lines across the two runs, want one naming lost_id=%s:\n%s", n, lost.ID, grepLines(logs, "lost"))
	}
	if total := d1Lost + d2Lost; total != n2 {
		t.Fatalf("kfollower_committed_records_lost_total: %v before the kill + %v after = %v, want %d", d1Lost, d2Lost, total, n2)
	}
	switch step {
	case "reported":
		if st.LastLost != nil {
			t.Fatalf("the restart reported the loss again: %+v", st.LastLost)
		}
	default:
		// Found again by reconciliation (copy, lost.json: the log was
		// untouched) or reported from the list at start (truncated).
		if l := st.LastLost; l == nil || l.ID != lost.ID || l.Recovered != (step == "truncated") {
			t.Fatalf("/status last_lost %+v, want %s (recovered %t)", l, lost.ID, step == "truncated")
		}
	}
}

// batchesFrom is the record batches of a log's bytes whose base offset is
// at or above from.
func batchesFrom(t *testing.T, raw []byte, from int64) []byte {
	t.Helper()
	for pos := 0; pos+12 <= len(raw); {
		end := pos + 12 + int(be.BigEndian.Uint32(raw[pos+8:]))
		if int64(be.BigEndian.Uint64(raw[pos:])) >= from {
			return raw[pos:]
		}
		pos = end
	}
	t.Fatalf("no batch at or above offset %d", from)
	return nil
}

// waitFile waits, with a deadline, for cond about the data dir; d must not
// exit meanwhile.
func waitFile(t *testing.T, d *daemon, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for !cond() {
		if d.exited() {
			t.Fatalf("kfollower exited (%v) before %s:\n%s", d.err, what, tail(d.stderr(), 40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 120 s:\n%s", what, tail(d.stderr(), 40))
		}
		time.Sleep(time.Millisecond)
	}
}

// eventDirs are the complete events under a partition's lost+found.
func eventDirs(t *testing.T, lostDir string) []string {
	var out []string
	for _, p := range glob(t, filepath.Join(lostDir, "*")) {
		if storage.IsLostEventName(filepath.Base(p)) {
			out = append(out, p)
		}
	}
	return out
}

func glob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// listTree names the kfollower-* files of the partition and everything in
// its lost+found, relative to the data dir, for the log.
func listTree(t *testing.T, data, partDir, lostDir string) []string {
	var out []string
	for _, p := range append(glob(t, filepath.Join(partDir, "kfollower-*")), append(glob(t, filepath.Join(lostDir, "*")), glob(t, filepath.Join(lostDir, "*", "*"))...)...) {
		rel, _ := filepath.Rel(data, p)
		out = append(out, rel)
	}
	return out
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
