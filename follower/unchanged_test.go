package follower

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Unchanged says yes exactly to a reply that stepping would turn into the
// same Fetch again, with nothing else changed: the state machine's Status
// after stepping it is the one before, and the next Fetch asks the same.
func TestUnchanged(t *testing.T) {
	now := time.Unix(0, 0)
	// fetching returns a partition with Fetch id in flight after a first
	// answer of high watermark 10 and log start 2.
	fetching := func(t *testing.T) (*Partition, *Fetch) {
		t.Helper()
		p := NewPartition(Config{Topic: "t"}, &memLog{})
		p.Step(now, LeaderChange{Leader: 1, LeaderEpoch: 3})
		f := next(t, p)
		if f == nil {
			t.Fatal("no Fetch")
		}
		if err := p.Step(now, FetchReply{ID: f.ID, HighWatermark: 10, LogStartOffset: 2, Diverging: EpochEndOffset{-1, -1}}); err != nil {
			t.Fatal(err)
		}
		return p, next(t, p)
	}
	idle := func(id uint64) FetchReply {
		return FetchReply{ID: id, HighWatermark: 10, LogStartOffset: 2, Diverging: EpochEndOffset{-1, -1}}
	}
	p, f := fetching(t)
	if !p.Unchanged(idle(f.ID)) {
		t.Fatal("the same high watermark and log start: want unchanged")
	}
	before := p.Status()
	if err := p.Step(now, idle(f.ID)); err != nil {
		t.Fatal(err)
	}
	f2 := next(t, p)
	if after := p.Status(); after != before {
		t.Errorf("an unchanged reply changed the status: %+v, was %+v", after, before)
	}
	if f2 == nil || f2.Offset != f.Offset || f2.LastFetchedEpoch != f.LastFetchedEpoch || f2.CurrentLeaderEpoch != f.CurrentLeaderEpoch || f2.Leader != f.Leader {
		t.Errorf("the next Fetch %+v differs from %+v", f2, f)
	}

	for name, change := range map[string]func(*FetchReply){
		"another id":     func(r *FetchReply) { r.ID++ },
		"records":        func(r *FetchReply) { r.Records = []byte{1} },
		"an error":       func(r *FetchReply) { r.ErrorCode = kerr.NotLeaderForPartition.Code },
		"a diverging":    func(r *FetchReply) { r.Diverging = EpochEndOffset{Epoch: 2, EndOffset: 0} },
		"a new hw":       func(r *FetchReply) { r.HighWatermark = 11 },
		"a new logstart": func(r *FetchReply) { r.LogStartOffset = 3 },
	} {
		p, f := fetching(t)
		r := idle(f.ID)
		change(&r)
		if p.Unchanged(r) {
			t.Errorf("%s: want changed", name)
		}
	}
	// A first answer in a new leader epoch is news, whatever it says.
	p, f = fetching(t)
	p.Step(now, LeaderChange{Leader: 1, LeaderEpoch: 4})
	if p.Unchanged(idle(f.ID)) {
		t.Error("after a new leader epoch: want changed")
	}
}

// next carries out p's Readies and returns the Fetch it hands out, if any.
func next(t *testing.T, p *Partition) *Fetch {
	t.Helper()
	var f *Fetch
	for p.HasReady() {
		rd := p.Ready()
		if r, ok := rd.Request.(*Fetch); ok {
			f = r
		}
		p.Advance(rd)
	}
	return f
}
