package integration

import (
	"context"
	"testing"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/integration/kafka"
)

// KIP-279's hard case, with real brokers: kfollower holds an epoch (eX) the
// final leader never had, and that leader holds an epoch (eZ < eX) kfollower
// never saw, so reconciliation needs two OffsetsForLeaderEpoch round trips:
// ask eX → the leader names eZ, which we lack → cut to the end of our e0,
// ask e0 → agree at N1 (docs/testing.md §6.9, KAFKA-6361).
//
//	e0  A leads: N1 records, copied by kfollower; kfollower stops
//	eZ  A paused and fenced, B leads: SZ records (kfollower is away)
//	eX  B killed, A resumed and elected uncleanly: SX records; kfollower
//	    restarts and copies them (it now holds e0, eX)
//	eY  A killed, B restarted and elected uncleanly: B holds e0, eZ, eY
func TestReconcileTwoRoundtrips(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{Layout: kafka.Isolated, NeedsFaults: true})
	const topic = "kip279"
	const a, b = int32(1), int32(2)
	const n1, nz, nx, ny = 200, 80, 60, 100
	c.CreateTopic(ctx, topic, [][]int32{{a, b}}, map[string]string{
		"min.insync.replicas": "1", "unclean.leader.election.enable": "false",
	})
	dir := t.TempDir()

	// e0
	s := follow(t, c, dir, topic)
	produceTo(ctx, t, c, topic, 0, "n1", n1)
	s.waitLogEnd(t, topic, 0, n1)
	s.stop()

	// eZ: B leads without A; kfollower is away.
	c.Pause(a)
	ez := c.WaitPartition(ctx, topic, 0, "leader B", func(st kafka.PartitionState) bool { return st.Leader == b })
	produceTo(ctx, t, c, topic, 0, "nz", nz)

	// eX: A leads without B's eZ records; kfollower copies A's new ones.
	c.Kill(b)
	c.WaitPartition(ctx, topic, 0, "no leader", func(st kafka.PartitionState) bool { return st.Leader == -1 })
	c.Resume(a)
	ex := c.ElectUnclean(ctx, topic, 0)
	if ex.Leader != a || ex.LeaderEpoch <= ez.LeaderEpoch {
		t.Fatalf("want A elected above epoch %d, got %v", ez.LeaderEpoch, ex)
	}
	s = follow(t, c, dir, topic)
	lost := produceTo(ctx, t, c, topic, 0, "nx", nx)
	if lost[0].Offset != n1 {
		t.Fatalf("A wrote its eX records from %d, want %d", lost[0].Offset, n1)
	}
	s.waitLogEnd(t, topic, 0, n1+nx)
	if evs := s.Events(); len(evs) != 0 {
		t.Fatalf("restart and reconciliation with A reported events: %v", evs)
	}

	// eY: B, which holds eZ and not eX, leads.
	c.Kill(a)
	c.WaitPartition(ctx, topic, 0, "no leader", func(st kafka.PartitionState) bool { return st.Leader == -1 })
	c.Restart(ctx, b)
	ey := c.ElectUnclean(ctx, topic, 0)
	if ey.Leader != b {
		t.Fatalf("want B elected, got %v", ey)
	}
	t.Logf("epochs: e0 0, eZ %d (B), eX %d (A), eY %d (B)", ez.LeaderEpoch, ex.LeaderEpoch, ey.LeaderEpoch)
	s.waitStatus(t, topic, 0, "reconciled with B", func(st fetcherStatus) bool {
		return st.LeaderEpoch == ey.LeaderEpoch && st.State == "fetching"
	})
	produceTo(ctx, t, c, topic, 0, "ny", ny)
	s.waitCaughtUp(ctx, c, topic, 1)
	s.compareWithLeader(ctx, c, topic, 0)

	evs := s.Events()
	if len(evs) != 1 {
		t.Fatalf("want one truncation event, got %v", evs)
	}
	ev, ok := evs[0].(*follower.TruncationEvent)
	if !ok || ev.From != n1 || ev.To != n1+nx || ev.Records != nx || ev.Roundtrips != 2 ||
		ev.LocalEpoch != ex.LeaderEpoch || ev.AgreedEpoch != 0 || ev.NewLeaderEpoch != ey.LeaderEpoch {
		t.Fatalf("truncation %+v; want [%d,%d), %d records, 2 roundtrips, local epoch %d, agreed epoch 0, new epoch %d",
			evs[0], n1, n1+nx, nx, ex.LeaderEpoch, ey.LeaderEpoch)
	}
	checkLostFound(t, dir, topic, lost)
}
