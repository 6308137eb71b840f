package lostfound

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// saveLoss appends two batches of five records, [0,10), to topic-partition
// and truncates them away as t says, as the daemon does: the saved event
// is storage's own.
func saveLoss(t *testing.T, dataDir, topic string, partition int32, tr storage.Truncation) storage.Lost {
	t.Helper()
	l, err := storage.Open(dataDir, topic, partition, storage.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Append(batch.BuildRun(0, 1, 2, 5)); err != nil {
		t.Fatal(err)
	}
	lost, err := l.TruncateWithLost(tr)
	if err != nil || lost.Batches == 0 {
		t.Fatalf("TruncateWithLost: %+v, %v", lost, err)
	}
	return lost
}

// Replay replays cluster loss only, unless IncludeCauses names the cause
// (or AllCauses); and of the first saved batch only the records at or
// above lost.json's from, the first offset lost: the cut fell inside that
// batch and the leader has the records below it.
func TestReplayHonoursCauseAndFrom(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "restored"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	dataDir := t.TempDir()
	// a-0 lost [7,10) of the batch [5,10): records 7, 8, 9 are lost.
	saveLoss(t, dataDir, "a", 0, storage.Truncation{Offset: 7, Cause: storage.CauseOffsetsForLeaderEpoch, OldLeaderEpoch: 1, NewLeaderEpoch: 2})
	// a-1's history [0,10) was dropped by --discard-on-gap.
	saveLoss(t, dataDir, "a", 1, storage.Truncation{Offset: 50, Full: true, Cause: storage.CauseDiscardedOnGap, OldLeaderEpoch: -1, NewLeaderEpoch: 2})

	ctx := context.Background()
	run := func(dry bool, causes ...string) *ReplayReport {
		t.Helper()
		rep, err := Replay(ctx, ReplayOptions{Client: cl, DataDir: dataDir, ToTopic: "restored", DryRun: dry, IncludeCauses: causes})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := run(false)
	if len(rep.Events) != 2 || rep.Replayed != 3 {
		t.Fatalf("default replay: %+v, want 3 records of a-0 replayed", rep)
	}
	loss, discard := rep.Events[0], rep.Events[1]
	if loss.Skipped || loss.Replayed != 3 || loss.NotLost != 2 || loss.Records != 5 || loss.Cause != storage.CauseOffsetsForLeaderEpoch {
		t.Fatalf("a-0: %+v, want 3 replayed and 2 records below from left out, of 5 in the saved batch", loss)
	}
	if !discard.Skipped || discard.Replayed != 0 || discard.Cause != storage.CauseDiscardedOnGap {
		t.Fatalf("a-1: %+v, want skipped: discarded-on-gap is not cluster loss", discard)
	}
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil || !strings.Contains(buf.String(), "skipped: not cluster loss (--include-cause discarded-on-gap") {
		t.Fatalf("table (%v):\n%s", err, buf.String())
	}
	// The replayed records are the lost offsets, by the source header.
	var srcs []string
	consumer, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("restored"))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	for len(srcs) < 3 {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == SourceHeader {
					srcs = append(srcs, string(h.Value))
				}
			}
		})
	}
	// Sources name the batch's leader epoch (1) before the offset.
	if got := strings.Join(srcs, " "); got != "a/0/1/7 a/0/1/8 a/0/1/9" {
		t.Fatalf("replayed %s, want a/0/1/7 a/0/1/8 a/0/1/9", got)
	}

	for _, causes := range [][]string{{storage.CauseDiscardedOnGap}, {AllCauses}} {
		rep = run(true, causes...)
		if rep.Replayed != 10 || rep.AlreadyPresent != 3 || rep.Events[1].Skipped {
			t.Fatalf("include %v: %+v, want a-1's 10 records, a-0's 3 already present", causes, rep)
		}
	}
}

// List skips a save in progress or interrupted (<event>.tmp), lost.json
// and all, and shows each event's cause in the table and the JSON.
func TestListCauseAndTmp(t *testing.T) {
	dataDir := t.TempDir()
	lost := saveLoss(t, dataDir, "a", 0, storage.Truncation{Offset: 50, Full: true, Cause: storage.CauseDiscardedOnGap, NewLeaderEpoch: 2})
	tmp := writeEvent(t, dataDir, storage.Lost{Topic: "a", Partition: 0, FirstOffset: 20, LastOffset: 29})
	if err := os.Rename(tmp, tmp+".tmp"); err != nil {
		t.Fatal(err)
	}
	rep, err := List(ListOptions{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Events) != 1 || rep.Events[0].Dir != lost.Dir || rep.Events[0].Cause != storage.CauseDiscardedOnGap || rep.Events[0].ClusterLoss {
		t.Fatalf("events %+v, want only %s, cause discarded-on-gap, not cluster loss", rep.Events, lost.Dir)
	}
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil || !strings.Contains(buf.String(), "CAUSE") ||
		!strings.Contains(buf.String(), "discarded-on-gap (not cluster loss)") {
		t.Fatalf("table (%v):\n%s", err, buf.String())
	}
	js, err := json.Marshal(rep)
	if err != nil || !bytes.Contains(js, []byte(`"cause":"discarded-on-gap"`)) || !bytes.Contains(js, []byte(`"clusterLoss":false`)) {
		t.Fatalf("json (%v) %s", err, js)
	}
}
