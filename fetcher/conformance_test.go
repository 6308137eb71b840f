package fetcher

import (
	"log/slog"
	"testing"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/kfollower/kfollower/wire/batch"
)

func collect(events *[]follower.Event) *Config {
	cfg := &Config{OnEvent: func(e follower.Event) { *events = append(*events, e) }, Logger: slog.New(slog.DiscardHandler)}
	cfg.withDefaults()
	return cfg
}

// A batch stamped above the epoch the fetch was fenced with fires
// CheckBatchEpochAboveLeader; batches at or below it do not.
func TestCheckBatchEpochs(t *testing.T) {
	var events []follower.Event
	cfg := collect(&events)
	l, err := storage.Open(t.TempDir(), "t", 0, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := &part{tp: wire.TopicPartition{Topic: "t", Partition: 0}, log: l,
		sm: follower.NewPartition(follower.Config{Topic: "t"}, l)}
	if err := p.sm.Step(time.Unix(0, 0), follower.LeaderChange{Leader: 1, LeaderEpoch: 3}); err != nil {
		t.Fatal(err)
	}
	appendRun := func(raw []byte) {
		t.Helper()
		if _, _, _, err := p.apply(cfg, []follower.Action{&follower.Append{Records: raw}}); err != nil {
			t.Fatal(err)
		}
	}
	appendRun(append(batch.BuildRun(0, 2, 2, 3), batch.BuildRun(6, 3, 1, 3)...))
	if len(events) != 0 {
		t.Fatalf("batches of epochs 2 and 3 under leader epoch 3 reported %v", events)
	}
	appendRun(append(batch.BuildRun(9, 3, 1, 3), batch.BuildRun(12, 4, 1, 3)...))
	if l.LogEndOffset() != 15 {
		t.Fatalf("log end %d after appending offsets 0..14: a conformance check must not change what is copied", l.LogEndOffset())
	}
	if len(events) != 1 {
		t.Fatalf("want one event for a batch of epoch 4 under leader epoch 3, got %v", events)
	}
	e := events[0].(*follower.ConformanceEvent)
	if e.Check != follower.CheckBatchEpochAboveLeader || e.LeaderEpoch != 3 {
		t.Fatalf("got %v", e)
	}
	t.Log(e)
}

// One broker naming a lower leader epoch than it named before fires
// CheckMetadataEpochBackwards; brokers lagging behind each other do not.
func TestCheckMetadataEpoch(t *testing.T) {
	var events []follower.Event
	m := &Manager{cfg: *collect(&events), metaEpochs: map[int32]map[wire.TopicPartition]int32{}}
	tp := wire.TopicPartition{Topic: "t", Partition: 0}
	m.checkMetadataEpoch(1, tp, 5)
	m.checkMetadataEpoch(2, tp, 4) // broker 2 behind broker 1: fine
	m.checkMetadataEpoch(1, tp, 6)
	m.checkMetadataEpoch(-1, tp, 1) // answer from an unknown broker: not checked
	if len(events) != 0 {
		t.Fatalf("no broker went back, yet %v", events)
	}
	m.checkMetadataEpoch(2, tp, 3)
	if len(events) != 1 {
		t.Fatalf("broker 2 went from 4 to 3: want one event, got %v", events)
	}
	e := events[0].(*follower.ConformanceEvent)
	if e.Check != follower.CheckMetadataEpochBackwards || e.LeaderEpoch != 4 {
		t.Fatalf("got %v", e)
	}
	t.Log(e)
}
