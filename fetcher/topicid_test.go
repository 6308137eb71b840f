package fetcher

import (
	"log/slog"
	"os"
	"testing"

	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestNoFetchWithoutTopicID follows 4,000 partitions of two topics over
// three brokers from a first Metadata answer that lacks one topic's id,
// then from one that names it. No Fetch may name a topic without its id
// (the story's brokers fail the test on one, as Kafka 4.4 fails the whole
// request), and once the id is known every partition of both topics is in
// its leader's next Fetch, under the topic's id.
func TestNoFetchWithoutTopicID(t *testing.T) {
	e := newDriverEnvAt(t, fastDir(t), slog.New(slog.DiscardHandler))
	defer e.close()
	const perTopic = 2000
	meta := func(withLateID bool) *kmsg.MetadataResponse {
		resp := kmsg.NewPtrMetadataResponse()
		for _, id := range []int32{1, 2, 3} {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID = id
			resp.Brokers = append(resp.Brokers, b)
		}
		for _, name := range []string{"early", "late"} {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = kmsg.StringPtr(name)
			if name == "early" || withLateID {
				copy(mt.TopicID[:], name)
			}
			for p := range int32(perTopic) {
				mp := kmsg.NewMetadataResponseTopicPartition()
				mp.Partition, mp.Leader, mp.LeaderEpoch = p, 1+p%3, 1
				mt.Partitions = append(mt.Partitions, mp)
			}
			resp.Topics = append(resp.Topics, mt)
		}
		return resp
	}
	e.m.placeAll(e.ctx, meta(false), -1)
	e.settle(t)
	if n := len(e.m.Statuses()); n != perTopic {
		t.Fatalf("before the late topic's id is known, %d partitions are followed; want the %d of the other topic", n, perTopic)
	}
	// Let each broker's first Fetch (the early topic alone) come back empty.
	for k, c := range e.inAir {
		delete(e.inAir, k)
		c.answer <- answer{resp: emptyFetchAnswer(c.req.(*kmsg.FetchRequest))}
		for _, w := range e.workers() {
			if w.id == k.broker {
				w.receive(<-w.flights)
				w.flight = nil
			}
		}
	}
	e.m.placeAll(e.ctx, meta(true), -1)
	e.settle(t)
	fetched := map[wire.TopicPartition]bool{}
	for _, c := range e.inAir {
		r, ok := c.req.(*kmsg.FetchRequest)
		if !ok {
			t.Fatalf("broker %d has a %T in the air, want a Fetch", c.broker, c.req)
		}
		for _, rt := range r.Topics {
			var want wire.TopicID
			copy(want[:], rt.Topic)
			if rt.TopicID != want {
				t.Errorf("broker %d's Fetch names topic %s under id %x, want %x", c.broker, rt.Topic, rt.TopicID, want)
			}
			for _, p := range rt.Partitions {
				fetched[wire.TopicPartition{Topic: rt.Topic, Partition: p.Partition}] = true
			}
		}
	}
	if len(fetched) != 2*perTopic {
		t.Fatalf("the Fetches in the air carry %d partitions, want all %d", len(fetched), 2*perTopic)
	}
}

// fastDir is a temporary data dir for a test that opens thousands of
// logs: on tmpfs (/dev/shm) where there is one, as a new log's directory
// and segment fsyncs cost tens of milliseconds each on a real disk.
func fastDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "kfollower-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// emptyFetchAnswer answers every partition of r with no records.
func emptyFetchAnswer(r *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	for _, rt := range r.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.HighWatermark, p.LogStartOffset = rp.Partition, 0, 0
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
