package fetcher

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetched converts raw as the one partition of a Fetch response, as the
// worker does: wire frames the batches once.
func fetched(t *testing.T, raw []byte) wire.FetchAnswer {
	t.Helper()
	tp := wire.TopicPartition{Topic: "t", Partition: 0}
	resp := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = raw
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	answers, missing := wire.FetchReplies(resp, map[wire.TopicPartition]wire.FetchPartition{tp: {}}, nil)
	if len(missing) > 0 {
		t.Fatalf("missing %v", missing)
	}
	return answers[tp]
}

// openPart is t-0 over an empty log, without a state machine: enough for
// apply.
func openPart(t *testing.T) *part {
	t.Helper()
	l, err := storage.Open(t.TempDir(), "t", 0, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &part{tp: wire.TopicPartition{Topic: "t", Partition: 0}, log: l}
}

// A batch stamped above the epoch the Append says the fetch was fenced with
// fires CheckBatchEpochAboveLeader, one event per run of batches of one
// epoch; batches at or below it do not; either way everything is copied,
// and the records counted are wire's.
func TestCheckBatchEpochs(t *testing.T) {
	p := openPart(t)
	l := p.log
	id := uint64(0)
	appendRun := func(raw []byte) applied {
		t.Helper()
		a := fetched(t, raw)
		id++
		p.fetched = fetchedBatches{id: id, Batches: a.Batches}
		done, err := p.apply(follower.Ready{Actions: []follower.Action{&follower.Append{ID: id, CurrentLeaderEpoch: 3, Records: a.Records}}})
		if err != nil {
			t.Fatal(err)
		}
		return done
	}
	done := appendRun(slices.Concat(batch.BuildRun(0, 2, 2, 3), batch.BuildRun(6, 3, 1, 3)))
	if len(done.checks) != 0 || done.records != 9 {
		t.Fatalf("batches of epochs 2 and 3 under leader epoch 3: %d records, events %v", done.records, done.checks)
	}
	done = appendRun(slices.Concat(batch.BuildRun(9, 3, 1, 3), batch.BuildRun(12, 4, 2, 1), batch.BuildRun(14, 5, 1, 1)))
	if l.LogEndOffset() != 15 || done.records != 6 {
		t.Fatalf("log end %d, %d records appended; want 15 and 6: a conformance check must not change what is copied", l.LogEndOffset(), done.records)
	}
	if len(done.checks) != 2 {
		t.Fatalf("want one event for the batches of epoch 4 and one for epoch 5 under leader epoch 3, got %v", done.checks)
	}
	for i, want := range []string{
		"2 batches from offset 12 carry leader epoch 4; the fetch was fenced at epoch 3",
		"batch at offset 14 carries leader epoch 5; the fetch was fenced at epoch 3",
	} {
		e := done.checks[i].(*follower.ConformanceEvent)
		if e.Check != follower.CheckBatchEpochAboveLeader || e.LeaderEpoch != 3 || e.Evidence != want {
			t.Fatalf("got %v, want evidence %q", e, want)
		}
	}
}

// An Append whose batches wire did not account for is refused rather than
// stored uncounted and unchecked.
func TestAppendNeedsWiresAccount(t *testing.T) {
	p := openPart(t)
	l := p.log
	a := fetched(t, batch.BuildRun(0, 1, 1, 1))
	p.fetched = fetchedBatches{id: 1, Batches: a.Batches}
	if _, err := p.apply(follower.Ready{Actions: []follower.Action{&follower.Append{ID: 2, Records: a.Records}}}); err == nil || l.LogEndOffset() != 0 {
		t.Fatalf("append of reply 2 with reply 1's account: err %v, log end %d", err, l.LogEndOffset())
	}
}

// One broker naming a lower leader epoch than it named before fires
// CheckMetadataEpochBackwards; brokers lagging behind each other do not.
func TestCheckMetadataEpoch(t *testing.T) {
	rec := &recorder{}
	cfg := Config{Logger: slog.New(slog.DiscardHandler), Observers: []Observer{rec}}
	cfg.withDefaults()
	m := &Manager{cfg: cfg, seen: map[wire.TopicPartition]seenMeta{}}
	tp := wire.TopicPartition{Topic: "t", Partition: 0}
	m.checkMetadataEpoch(1, tp, 5)
	m.checkMetadataEpoch(2, tp, 4) // broker 2 behind broker 1: fine
	m.checkMetadataEpoch(1, tp, 6)
	m.checkMetadataEpoch(-1, tp, 1) // answer from an unknown broker: not checked
	if events := rec.Events(); len(events) != 0 {
		t.Fatalf("no broker went back, yet %v", events)
	}
	m.checkMetadataEpoch(2, tp, 3)
	events := rec.Events()
	if len(events) != 1 {
		t.Fatalf("broker 2 went from 4 to 3: want one event, got %v", events)
	}
	e := events[0].(*follower.ConformanceEvent)
	if e.Check != follower.CheckMetadataEpochBackwards || e.LeaderEpoch != 4 {
		t.Fatalf("got %v", e)
	}
	t.Log(e)
}
