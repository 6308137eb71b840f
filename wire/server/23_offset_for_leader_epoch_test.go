package server

import (
	"math/rand/v2"
	"testing"

	"github.com/kfollower/kfollower/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// epochLog is a Log of epochs only, for endOffsetFor.
type epochLog struct {
	Log
	c   storage.Epochs
	leo int64
}

func (l epochLog) LogEndOffset() int64 { return l.leo }
func (l epochLog) LatestEpoch() (int32, bool) {
	e, ok := l.c.Latest()
	return e.Epoch, ok
}
func (l epochLog) EndOffsetForEpoch(e int32) (int32, int64) { return l.c.EndOffsetFor(e, l.leo) }

// endOffsetFor is Kafka's endOffsetFor over the cache a leader would hold:
// the log's, with the served epoch assigned at the log end as
// Partition.makeLeader does. storage.Epochs implements both rules
// (LeaderEpochFileCache.assign and endOffsetFor), so over random lineages
// the answer must equal its answer for that cache, for every epoch asked.
func TestEndOffsetForIsALeadersCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		var c storage.Epochs
		epoch, off := int32(rng.IntN(3)), int64(rng.IntN(5))
		for range rng.IntN(5) {
			c, _, _ = c.Assign(epoch, off)
			epoch += 1 + int32(rng.IntN(3))
			off += 1 + int64(rng.IntN(10))
		}
		leo := off
		latest, _ := c.Latest()
		served := latest.Epoch + int32(rng.IntN(4))
		if c.Len() == 0 {
			served = int32(rng.IntN(4))
		}
		leader, _, err := c.Assign(served, leo)
		if err != nil {
			t.Fatal(err)
		}
		p := partition{log: epochLog{c: c, leo: leo}, epoch: served}
		for r := int32(-1); r <= served+2; r++ {
			ge, go_ := p.endOffsetFor(r)
			we, wo := leader.EndOffsetFor(r, leo)
			if ge != we || go_ != wo {
				t.Fatalf("case %d: cache %v, log end %d, served %d: endOffsetFor(%d) = (%d, %d), a leader's cache %v says (%d, %d)",
					i, c, leo, served, r, ge, go_, leader, we, wo)
			}
		}
	}
}

func TestOffsetForLeaderEpoch(t *testing.T) {
	cat := newCatalog()
	cat.add("t", 1, 2)
	// Epochs (0,0) (2,10), log end 20, served 5: the copy lost epochs 3
	// and 4 that a reader may hold.
	cat.serve("t", 0, openLog(t, "t", 0, false, run(0, 0, 5, 2), run(10, 2, 5, 2)), 5)
	_, addr := testServer(t, cat)
	c := dial(t, addr)
	for _, tc := range []struct {
		name           string
		topic          string
		partition      int32
		current, epoch int32
		err            *kerr.Error
		wantEpoch      int32
		wantEnd        int64
	}{
		{"served epoch: the log end", "t", 0, -1, 5, nil, 5, 20},
		{"lost epoch: the latest held, ending at the log end", "t", 0, -1, 4, nil, 2, 20},
		{"latest held", "t", 0, -1, 2, nil, 2, 20},
		{"unknown epoch between: the floor", "t", 0, -1, 1, nil, 0, 10},
		{"first epoch", "t", 0, 5, 0, nil, 0, 10},
		{"above the served epoch", "t", 0, -1, 6, nil, -1, -1},
		{"undefined", "t", 0, -1, -1, nil, -1, -1},
		{"fenced", "t", 0, 4, 2, kerr.FencedLeaderEpoch, -1, -1},
		{"unknown leader epoch", "t", 0, 6, 2, kerr.UnknownLeaderEpoch, -1, -1},
		{"not served", "t", 1, -1, 0, kerr.NotLeaderForPartition, -1, -1},
		{"no such partition", "t", 2, -1, 0, kerr.UnknownTopicOrPartition, -1, -1},
		{"no such topic", "u", 0, -1, 0, kerr.UnknownTopicOrPartition, -1, -1},
	} {
		for _, v := range versions(23) {
			req := at(kmsg.NewPtrOffsetForLeaderEpochRequest(), v)
			req.ReplicaID = -1
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = tc.topic
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = tc.partition, tc.current, tc.epoch
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			p := c.do(req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
			if err := kerr.ErrorForCode(p.ErrorCode); err != error(tc.err) && !(tc.err == nil && err == nil) {
				t.Errorf("%s v%d: error %v, want %v", tc.name, v, err, tc.err)
			}
			if p.Partition != tc.partition || p.LeaderEpoch != tc.wantEpoch || p.EndOffset != tc.wantEnd {
				t.Errorf("%s v%d: (%d, %d), want (%d, %d)", tc.name, v, p.LeaderEpoch, p.EndOffset, tc.wantEpoch, tc.wantEnd)
			}
		}
	}
}
