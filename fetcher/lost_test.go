package fetcher

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
)

// unreportedLoss leaves in dir what a process killed after its truncation
// was durable and before it reported the loss leaves (or one killed after
// the intent, whose truncation the next Open completes: both end with the
// loss listed by UnreportedLosses): t-0 held [0,10) in leader epoch 1 and
// lost [6,10). It returns the loss.
func unreportedLoss(t *testing.T, dir string, tr storage.Truncation) storage.Lost {
	t.Helper()
	var id storage.TopicID
	copy(id[:], "t") // the story's Metadata gives each topic its name as id
	l, err := storage.Open(dir, "t", 0, storage.Options{TopicID: id, Logger: slog.New(slog.DiscardHandler)})
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

// A loss the previous process left unreported is reported when the log is
// opened, before the partition has a leader: one log line naming its
// durable id, one event for the metrics, /status. Then it is marked: the
// next start reports nothing.
func TestLossLeftUnreportedIsReportedOnceAtStart(t *testing.T) {
	dir := t.TempDir()
	lost := unreportedLoss(t, dir, storage.Truncation{Offset: 6, Cause: storage.CauseDivergingEpoch, OldLeaderEpoch: 1, NewLeaderEpoch: 2})
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))
	for run := 1; run <= 2; run++ {
		e := newDriverEnvAt(t, dir, lg)
		out := e.handle(t, &datadriven.TestData{Cmd: "metadata", Input: "t-0 leader=-1 epoch=2"})
		st := status(e.m, "t", 0)
		e.shutdown(t)
		want := "event: truncation t/0 lost [6,10) leader-epoch 1->2 local-epoch=1 agreed-epoch=-1 roundtrips=0 highest-hw=-1 cause=diverging-epoch records=5"
		if run == 1 {
			if strings.Count(out, "event: ") != 1 || !strings.Contains(out, want) {
				t.Fatalf("first start: observer told\n%s\nwant one event: %s", out, want)
			}
			if st.LastLost == nil || st.LastLost.ID != lost.ID || !st.LastLost.Recovered || st.LastLost.From != 6 || st.LastLost.To != 10 ||
				st.LastTruncation == nil || st.LastTruncation.Records != 5 {
				t.Fatalf("first start: status %+v (last lost %+v), want loss %s [6,10) recovered", st, st.LastLost, lost.ID)
			}
		} else if strings.Contains(out, "event: ") || st.LastLost != nil {
			t.Fatalf("second start reported the loss again: observer told\n%s\nlast lost %+v", out, st.LastLost)
		}
	}
	if n := strings.Count(logs.String(), "truncated: committed data lost by the cluster"); n != 1 ||
		!strings.Contains(logs.String(), "lost_id="+lost.ID) || !strings.Contains(logs.String(), "recovered=true") {
		t.Fatalf("want one loss line naming lost_id=%s, got %d in\n%s", lost.ID, n, logs.String())
	}
}

// History --discard-on-gap dropped, left unreported, is reported as the
// gap event it was, with the discarded range, not as cluster loss.
func TestDiscardLeftUnreportedIsReportedAsGap(t *testing.T) {
	dir := t.TempDir()
	unreportedLoss(t, dir, storage.Truncation{Offset: 50, Full: true, Cause: storage.CauseDiscardedOnGap, OldLeaderEpoch: -1, NewLeaderEpoch: 2})
	e := newDriverEnvAt(t, dir, slog.New(slog.DiscardHandler))
	defer e.close()
	out := e.handle(t, &datadriven.TestData{Cmd: "metadata", Input: "t-0 leader=-1 epoch=2"})
	if want := "event: gap t/0 never-copied [10,50) leader-epoch=2 discarded [0,10)"; strings.Count(out, "event: ") != 1 || !strings.Contains(out, want) {
		t.Fatalf("observer told\n%s\nwant one event: %s", out, want)
	}
	if st := status(e.m, "t", 0); st.LastLost == nil || st.LastLost.Cause != storage.CauseDiscardedOnGap || st.LastTruncation != nil {
		t.Fatalf("status %+v, last lost %+v: want the discard, and no truncation", st, st.LastLost)
	}
}

// The cause and epochs lost.json records come from the Ready's event: a
// truncation's cause, or discarded-on-gap for history --discard-on-gap
// dropped; lost.json's from is the event's.
func TestLossCauseFromReady(t *testing.T) {
	for _, tc := range []struct {
		rd    follower.Ready
		cause string
		from  int64
		epoch int32
	}{
		{follower.Ready{
			Actions: []follower.Action{&follower.MoveToLostFound{From: 7, To: 10}, &follower.TruncateTo{Offset: 7}},
			Events:  []follower.Event{&follower.TruncationEvent{Cause: follower.CauseDivergingEpoch, OldLeaderEpoch: 1, NewLeaderEpoch: 3, From: 7, To: 10}},
		}, storage.CauseDivergingEpoch, 7, 3},
		{follower.Ready{
			Actions: []follower.Action{&follower.MoveToLostFound{From: 0, To: 10}, &follower.TruncateFullyAndStartAt{Offset: 40}},
			Events:  []follower.Event{&follower.GapEvent{LeaderEpoch: 4, From: 10, To: 40, Discarded: true, DiscardedFrom: 0, DiscardedTo: 10}},
		}, storage.CauseDiscardedOnGap, 0, 4},
	} {
		p := openPart(t)
		if err := p.log.Append(batch.BuildRun(0, 1, 2, 5)); err != nil {
			t.Fatal(err)
		}
		done, err := p.apply(tc.rd)
		if err != nil || done.lost == nil {
			t.Fatalf("%v: %+v, %v", tc.rd, done, err)
		}
		l, err := storage.ReadLost(done.lost.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if l.Cause != tc.cause || l.From != tc.from || l.Truncation == nil || l.Truncation.NewLeaderEpoch != tc.epoch {
			t.Fatalf("%v: lost.json %+v, want cause %s from %d new leader epoch %d", tc.rd, l, tc.cause, tc.from, tc.epoch)
		}
		if got := p.log.UnreportedLosses(); len(got) != 1 || got[0].ID != l.ID {
			t.Fatalf("unreported %+v, want %s until the driver reports it", got, l.ID)
		}
	}
}
