package fetcher

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestChaseMoves: Metadata that shows a leader move is read again soon
// (chaseInterval), not after MetadataInterval, because a move of many
// partitions reaches each broker's Metadata in parts. Here the interval is
// an hour, so after the refresh that found t-0 moved (asked for by the
// old leader's Fetch answer) only the chase can ask again. Checked that it
// can fail: with Run resetting its timer to MetadataInterval whatever the
// answer, no Metadata request follows the one that found the move.
func TestChaseMoves(t *testing.T) {
	c := newKfake(t, kfake.NumBrokers(3), kfake.SeedTopics(1, "t"))
	var moved atomic.Bool
	var after atomic.Int32 // Metadata requests received after the move was seen
	c.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if moved.Load() {
			after.Add(1)
		}
		return nil, nil, false
	})
	obs := &moveSeen{moved: &moved}
	m := kfakeManager(t, c, Config{
		DataDir: t.TempDir(), Follow: func(topic string) bool { return topic == "t" },
		MetadataInterval: time.Hour,
		Backoff:          follower.BackoffPolicy{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond},
		Logger:           slog.New(slog.DiscardHandler),
		Observers:        []Observer{obs},
	})
	stop := startManager(t, m)
	waitStatus(t, m, "t-0 fetching", func(s Status) bool { return s.State == "fetching" })
	from := status(m, "t", 0).Leader
	to := (from + 1) % 3
	if err := c.MoveTopicPartition("t", 0, to); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, m, "t-0 reconciled with its new leader", func(s Status) bool {
		return s.Leader == to && s.State == "fetching" && s.Reconciled
	})
	deadline := time.Now().Add(30 * time.Second)
	for after.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no Metadata request after the one that showed t-0 moved from broker %d to %d (MetadataInterval is an hour)", from, to)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestPlaceAllReportsMoves: placeAll reports a move when an answer names
// another leader or epoch than the last seen for a partition followed
// before, newer (a move) or older (a broker that has not yet applied it),
// and not for the first sight of a partition or the same leaders again:
// then Run goes back to MetadataInterval.
func TestPlaceAllReportsMoves(t *testing.T) {
	e := newDriverEnvAt(t, t.TempDir(), slog.New(slog.DiscardHandler))
	defer e.close()
	answer := func(leader, epoch int32) *kmsg.MetadataResponse {
		resp := kmsg.NewPtrMetadataResponse()
		for _, id := range []int32{1, 2} {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = id, "localhost", 9090+id
			resp.Brokers = append(resp.Brokers, b)
		}
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.TopicID = kmsg.StringPtr("t"), wire.TopicID{1}
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.Partition, rp.Leader, rp.LeaderEpoch = 0, leader, epoch
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp
	}
	for _, c := range []struct {
		what          string
		leader, epoch int32
		want          bool
	}{
		{"first sight", 1, 3, false},
		{"the same again", 1, 3, false},
		{"moved to broker 2", 2, 4, true},
		{"a broker not yet at the move", 1, 3, true},
		{"the move again", 2, 4, false},
	} {
		if got := e.m.placeAll(e.ctx, answer(c.leader, c.epoch), -1); got != c.want {
			t.Errorf("%s (leader %d, epoch %d): placeAll reports moving %v, want %v", c.what, c.leader, c.epoch, got, c.want)
		}
	}
}

// moveSeen marks moved at the first leader change Metadata shows.
type moveSeen struct {
	NopObserver
	moved *atomic.Bool
}

func (o *moveSeen) LeaderChanged(wire.TopicPartition, follower.LeaderChange, follower.LeaderChange) {
	o.moved.Store(true)
}

// waitStatus waits until t-0's status satisfies ok, failing after a
// deadline.
func waitStatus(t *testing.T, m *Manager, what string, ok func(Status) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok(status(m, "t", 0)) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: status %+v", what, status(m, "t", 0))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
