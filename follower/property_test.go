package follower

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// history is a generated pair of logs: ours (the follower's) and the
// leader's, sharing exactly the first prefix offsets.
type history struct {
	ours, leader *memLog
	prefix       int64
	leaderEpoch  int32 // the leader's current epoch
}

// genHistory draws two epoch histories with a common prefix, obeying what
// Kafka guarantees: one leader per epoch, so an epoch held by both logs has
// the same start offset in both and lies in the common prefix (or is the
// prefix's last epoch, continued on one side only); epochs and start offsets
// increase; either side may lack epochs (epochs with no records are
// dropped); the leader's cache ends with its current epoch, the largest of
// all, seeded at its log end when it was elected (Partition.makeLeader).
func genHistory(r *rand.Rand) history {
	epoch := int32(r.IntN(3))
	next := func() int32 { epoch += 1 + int32(r.IntN(3)); return epoch }

	var common []epochEntry
	prefix := int64(r.IntN(40))
	if prefix > 0 {
		common = append(common, epochEntry{epoch, 0})
		for off := int64(1); off < prefix; off++ {
			if r.IntN(6) == 0 {
				common = append(common, epochEntry{next(), off})
			}
		}
	}
	ours := &memLog{epochs: append([]epochEntry(nil), common...), leo: prefix}
	leader := &memLog{epochs: append([]epochEntry(nil), common...), leo: prefix}

	tailLen := func() int64 {
		if r.IntN(4) == 0 {
			return 0 // one side simply ends at the prefix
		}
		return 1 + int64(r.IntN(30))
	}
	ourLen, leaderLen := tailLen(), tailLen()
	// Which side, if any, continues the prefix's last epoch past the
	// prefix. At most one: if both did, they would agree at the prefix end.
	continues := 0
	if len(common) > 0 {
		continues = r.IntN(3) // 0 neither, 1 ours, 2 leader
	}
	// Tail epochs are disjoint between the sides; each new epoch goes to
	// one side or none.
	type tail struct {
		l    *memLog
		len  int64
		next int64 // offset of the next tail record
	}
	tails := [2]*tail{{ours, ourLen, prefix}, {leader, leaderLen, prefix}}
	for i, t := range tails {
		if t.len > 0 && continues == i+1 {
			t.next = prefix + 1 + int64(r.IntN(int(t.len)))
		}
	}
	for tails[0].next < prefix+ourLen || tails[1].next < prefix+leaderLen {
		e := next()
		side := r.IntN(3)
		if side == 2 {
			continue // an epoch neither side holds records of
		}
		t := tails[side]
		if t.next >= prefix+t.len {
			continue
		}
		t.l.epochs = append(t.l.epochs, epochEntry{e, t.next})
		t.next += 1 + int64(r.IntN(int(prefix+t.len-t.next)))
	}
	ours.leo = prefix + ourLen
	leader.leo = prefix + leaderLen
	cur := next()
	leader.assign(cur, leader.leo)
	return history{ours: ours, leader: leader, prefix: prefix, leaderEpoch: cur}
}

// leaderFetch is the leader's truncate-on-fetch check for a Fetch at offset
// with lastFetched (Partition.readRecords).
func leaderFetch(l *memLog, offset int64, lastFetched int32) (div EpochEndOffset, oor bool) {
	div = EpochEndOffset{Epoch: -1, EndOffset: -1}
	if lastFetched >= 0 {
		e, o := l.EndOffsetForEpoch(lastFetched)
		if e == UndefinedEpoch || o == UndefinedOffset {
			return div, true
		}
		if offset < l.start {
			return div, true
		}
		if e < lastFetched || o < offset {
			return EpochEndOffset{Epoch: e, EndOffset: o}, false
		}
	}
	return div, offset < l.start || offset > l.leo
}

// TestReconcileOracle checks the reconciliation against the common prefix
// the histories were built with: it ends exactly there, never cuts below it,
// takes at most (local epochs + 1) leader answers, and reports each
// reconciliation it finishes with the round trips the oracle counted. Half
// the runs
// reconcile with OffsetsForLeaderEpoch; the other half get no information
// from it and must find the divergence through DivergingEpoch.
func TestReconcileOracle(t *testing.T) {
	for seed := uint64(1); seed <= 20000; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x6b666f6c6c6f77))
		h := genHistory(r)
		viaFetch := seed%2 == 0
		desc := fmt.Sprintf("seed %d: ours %v; leader %v; prefix %d; via fetch %v", seed, h.ours, h.leader, h.prefix, viaFetch)
		localEpochs := len(h.ours.epochs)
		if err := runOracle(h, viaFetch, localEpochs); err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
	}
}

func runOracle(h history, viaFetch bool, localEpochs int) error {
	now := time.Unix(0, 0)
	startLEO := h.ours.leo
	p := NewPartition(Config{Topic: "t"}, h.ours)
	if err := p.Step(now, LeaderChange{Leader: 1, LeaderEpoch: h.leaderEpoch}); err != nil {
		return err
	}
	answers, noInfo := 0, viaFetch
	injected := false // a (-1, -1) was answered
	// rounds counts the answers stepped since the last ReconciledEvent;
	// reconciled is the last such event.
	rounds := 0
	var reconciled *ReconciledEvent
	for range 100 {
		var req Request
		for p.HasReady() {
			rd := p.Ready()
			if len(rd.Actions) > 0 && rd.Request != nil {
				return fmt.Errorf("a Ready with both actions and a request: %v", rd)
			}
			for _, a := range rd.Actions {
				switch a := a.(type) {
				case *MoveToLostFound:
					if a.From < h.prefix {
						return fmt.Errorf("moves [%d,%d) to lost+found, below the common prefix", a.From, a.To)
					}
				case *TruncateTo:
					if a.Offset < h.prefix {
						return fmt.Errorf("truncates to %d, below the common prefix", a.Offset)
					}
					h.ours.truncateTo(a.Offset)
				default:
					return fmt.Errorf("unexpected action %v", a)
				}
			}
			for _, e := range rd.Events {
				if ce, ok := e.(*ConformanceEvent); ok {
					// The injected (-1, -1) is a broker answer the
					// protocol rules out, and must be reported; the
					// oracle leader's own answers must never be.
					if ce.Check != CheckUndefinedAnswer || !injected {
						return fmt.Errorf("false alarm: %v", ce)
					}
					continue
				}
				if re, ok := e.(*ReconciledEvent); ok {
					if re.Roundtrips != rounds || re.LogEndOffset != h.ours.leo || re.LeaderEpoch != h.leaderEpoch {
						return fmt.Errorf("%v after %d answers, log end %d, leader epoch %d", re, rounds, h.ours.leo, h.leaderEpoch)
					}
					rounds, reconciled = 0, re
					continue
				}
				te, ok := e.(*TruncationEvent)
				if !ok || te.From != h.prefix || te.To != startLEO {
					return fmt.Errorf("event %v, want lost [%d,%d)", e, h.prefix, startLEO)
				}
			}
			req = rd.Request
			p.Advance(rd)
		}
		switch req := req.(type) {
		case *OffsetsForLeaderEpoch:
			var ans EpochEndOffset
			if noInfo {
				ans = EpochEndOffset{Epoch: -1, EndOffset: -1}
				noInfo, injected = false, true
			} else {
				ans.Epoch, ans.EndOffset = h.leader.EndOffsetForEpoch(req.LeaderEpoch)
				answers++
			}
			rounds++
			if err := p.Step(now, EpochReply{ID: req.ID, Leader: ans}); err != nil {
				return err
			}
		case *Fetch:
			div, oor := leaderFetch(h.leader, req.Offset, req.LastFetchedEpoch)
			if oor {
				return fmt.Errorf("fetch %v: the leader would answer OFFSET_OUT_OF_RANGE", req)
			}
			if div.Epoch < 0 {
				// Converged: the leader would serve records from here.
				if h.ours.leo != h.prefix || req.Offset != h.prefix {
					return fmt.Errorf("converged at %d (log end %d), want the common prefix %d", req.Offset, h.ours.leo, h.prefix)
				}
				if answers > localEpochs+1 {
					return fmt.Errorf("%d leader answers for %d local epochs", answers, localEpochs)
				}
				if startLEO > h.prefix && p.Status().State != StateFetching {
					return fmt.Errorf("state %v", p.Status().State)
				}
				if reconciled == nil || reconciled.LogEndOffset != h.prefix {
					return fmt.Errorf("converged at %d, last reconciled event %v", req.Offset, reconciled)
				}
				return nil
			}
			answers++
			rounds++
			if err := p.Step(now, FetchReply{ID: req.ID, Diverging: div, HighWatermark: -1, LogStartOffset: -1}); err != nil {
				return err
			}
		default:
			return fmt.Errorf("no request to send (state %v)", p.State())
		}
	}
	return fmt.Errorf("no convergence after 100 requests")
}

// TestDecideTable pins each row of getOffsetTruncationState
// (AbstractFetcherThread) with Kafka's own test numbers where they exist.
func TestDecideTable(t *testing.T) {
	// local epochs (1,0) (3,120) (5,180), LEO 200 (ReplicaFetcherThreadTest
	// shapes).
	log := &memLog{leo: 200, epochs: []epochEntry{{1, 0}, {3, 120}, {5, 180}}}
	empty := &memLog{leo: 200}
	for _, tc := range []struct {
		name   string
		log    LocalLog
		leader EpochEndOffset
		want   Truncation
	}{
		{"no information keeps all", log, EpochEndOffset{-1, -1}, Truncation{Offset: 200, Complete: true, Rule: RuleNoInformation}},
		{"pre-KIP-279 answer", log, EpochEndOffset{-1, 155}, Truncation{Offset: 155, Complete: true, Rule: RuleNoLeaderEpoch}},
		{"pre-KIP-279 answer past LEO", log, EpochEndOffset{-1, 250}, Truncation{Offset: 200, Complete: true, Rule: RuleNoLeaderEpoch}},
		{"latest epoch agreed, leader shorter", log, EpochEndOffset{5, 156}, Truncation{Offset: 156, Complete: true, Rule: RuleEpochAgreed}},
		{"latest epoch agreed, leader longer", log, EpochEndOffset{5, 260}, Truncation{Offset: 200, Complete: true, Rule: RuleEpochAgreed}},
		{"older epoch agreed, ours shorter", log, EpochEndOffset{3, 190}, Truncation{Offset: 180, Complete: true, Rule: RuleEpochAgreed}},
		{"epoch unknown locally", log, EpochEndOffset{4, 155}, Truncation{Offset: 180, NextEpoch: 3, Rule: RuleEpochUnknownLocally}},
		{"epoch unknown locally, leader shorter", log, EpochEndOffset{2, 100}, Truncation{Offset: 120, NextEpoch: 1, Rule: RuleEpochUnknownLocally}},
		{"epoch below our first", log, EpochEndOffset{0, 50}, Truncation{Offset: 0, Complete: true, Rule: RuleEpochAgreed}},
		{"no local epochs", empty, EpochEndOffset{4, 156}, Truncation{Offset: 156, Complete: true, Rule: RuleNoLocalEpochs}},
		{"no local epochs, leader longer", empty, EpochEndOffset{4, 202}, Truncation{Offset: 200, Complete: true, Rule: RuleNoLocalEpochs}},
		{"answer above our latest", log, EpochEndOffset{7, 150}, Truncation{Offset: 150, Complete: true, Rule: RuleNoLocalEpochs}},
	} {
		if got := Decide(tc.log, tc.leader); got != tc.want {
			t.Errorf("%s: Decide(%v) = %+v, want %+v", tc.name, tc.leader, got, tc.want)
		}
	}
}

// TestCappedLogMatchesTruncated checks that the virtual truncation answers
// exactly as the log truncated for real would (LeaderEpochFileCache
// semantics).
func TestCappedLogMatchesTruncated(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for range 5000 {
		h := genHistory(r)
		l := h.ours
		if len(l.epochs) == 0 {
			continue
		}
		// Truncate to the end of a random epoch below the latest, as the
		// KIP-279 loop does.
		i := r.IntN(len(l.epochs))
		end := l.leo
		if i+1 < len(l.epochs) {
			end = l.epochs[i+1].start
		}
		real := &memLog{start: l.start, leo: l.leo, epochs: append([]epochEntry(nil), l.epochs...)}
		real.truncateTo(end)
		virt := capLog(l, end, l.epochs[i].epoch, true)
		if a, b := real.LogEndOffset(), virt.LogEndOffset(); a != b {
			t.Fatalf("%v cut at %d: LEO %d vs %d", l, end, a, b)
		}
		ra, rok := real.LatestEpoch()
		va, vok := virt.LatestEpoch()
		if ra != va || rok != vok {
			t.Fatalf("%v cut at %d: latest %d,%v vs %d,%v", l, end, ra, rok, va, vok)
		}
		for e := int32(-1); e <= l.epochs[len(l.epochs)-1].epoch+2; e++ {
			re, ro := real.EndOffsetForEpoch(e)
			ve, vo := virt.EndOffsetForEpoch(e)
			if re != ve || ro != vo {
				t.Fatalf("%v cut at %d: EndOffsetForEpoch(%d) = (%d,%d) truncated vs (%d,%d) virtual", l, end, e, re, ro, ve, vo)
			}
		}
	}
}

// TestReconcileOracleChaos runs the same oracle through lost connections,
// UNKNOWN_LEADER_EPOCH and FENCED_LEADER_EPOCH answers, leader epoch bumps
// in the middle of the loop, and stale replies delivered late. The loop must
// still end exactly at the common prefix, never cut below it, report the
// loss once and discard every stale reply.
func TestReconcileOracleChaos(t *testing.T) {
	for seed := uint64(1); seed <= 5000; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x6b666f6c6c6f77))
		h := genHistory(r)
		desc := fmt.Sprintf("seed %d: ours %v; leader %v; prefix %d", seed, h.ours, h.leader, h.prefix)
		if err := runChaos(h, rand.New(rand.NewPCG(seed, 99))); err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
	}
}

func runChaos(h history, chaos *rand.Rand) error {
	now := time.Unix(0, 0)
	startLEO := h.ours.leo
	epoch := h.leaderEpoch
	p := NewPartition(Config{Topic: "t", JitterSeed: chaos.Uint64()}, h.ours)
	if err := p.Step(now, LeaderChange{Leader: 1, LeaderEpoch: epoch}); err != nil {
		return err
	}
	bump := func() error {
		epoch++
		h.leader.assign(epoch, h.leader.leo) // as Partition.makeLeader does
		return p.Step(now, LeaderChange{Leader: 1, LeaderEpoch: epoch})
	}
	var stale []Msg
	var lost [][2]int64
	for range 2000 {
		for p.HasReady() {
			rd := p.Ready()
			for _, a := range rd.Actions {
				switch a := a.(type) {
				case *MoveToLostFound:
					lost = append(lost, [2]int64{a.From, a.To})
				case *TruncateTo:
					if a.Offset < h.prefix {
						return fmt.Errorf("truncates to %d, below the common prefix", a.Offset)
					}
					h.ours.truncateTo(a.Offset)
				default:
					return fmt.Errorf("unexpected action %v", a)
				}
			}
			for _, e := range rd.Events {
				if re, ok := e.(*ReconciledEvent); ok && (re.LogEndOffset != h.ours.leo || re.LeaderEpoch != epoch) {
					return fmt.Errorf("%v, but the log ends at %d in leader epoch %d", re, h.ours.leo, epoch)
				}
			}
			p.Advance(rd)
		}
		if len(stale) > 0 && chaos.IntN(3) == 0 {
			if err := p.Step(now, stale[0]); err != ErrStale {
				return fmt.Errorf("late reply %+v: Step = %v, want ErrStale", stale[0], err)
			}
			stale = stale[1:]
		}
		req := p.inflight
		if req == nil {
			switch p.State() {
			case StateFenced:
				if err := bump(); err != nil {
					return err
				}
			case StateBackoff:
				now = p.NextWake()
				if err := p.Step(now, Tick{}); err != nil {
					return err
				}
			default:
				return fmt.Errorf("nothing in flight in state %v", p.State())
			}
			continue
		}
		// The leader's true answer to req.
		var reply Msg
		converged := false
		switch req := req.(type) {
		case *OffsetsForLeaderEpoch:
			e, o := h.leader.EndOffsetForEpoch(req.LeaderEpoch)
			reply = EpochReply{ID: req.ID, Leader: EpochEndOffset{Epoch: e, EndOffset: o}}
		case *Fetch:
			div, oor := leaderFetch(h.leader, req.Offset, req.LastFetchedEpoch)
			if oor {
				return fmt.Errorf("fetch %v: the leader would answer OFFSET_OUT_OF_RANGE", req)
			}
			converged = div.Epoch < 0
			reply = FetchReply{ID: req.ID, Diverging: div, HighWatermark: -1, LogStartOffset: -1}
			if converged && (h.ours.leo != h.prefix || req.Offset != h.prefix) {
				return fmt.Errorf("converged at %d (log end %d), want %d", req.Offset, h.ours.leo, h.prefix)
			}
		default:
			return fmt.Errorf("unexpected request %v", req)
		}
		var err error
		switch chaos.IntN(10) {
		case 0:
			err = p.Step(now, RequestFailed{ID: req.RequestID(), Err: fmt.Errorf("connection reset")})
		case 1, 2:
			code := kerr.UnknownLeaderEpoch.Code
			if chaos.IntN(3) == 0 {
				code = kerr.FencedLeaderEpoch.Code
			}
			switch req.(type) {
			case *OffsetsForLeaderEpoch:
				err = p.Step(now, EpochReply{ID: req.RequestID(), ErrorCode: code})
			default:
				err = p.Step(now, FetchReply{ID: req.RequestID(), ErrorCode: code, HighWatermark: -1, LogStartOffset: -1})
			}
		case 3:
			// A new leader epoch while the request is out; its answer
			// arrives later and must be ignored.
			stale = append(stale, reply)
			err = bump()
		default:
			if converged {
				if len(lost) > 1 || (startLEO > h.prefix) != (len(lost) == 1) ||
					(len(lost) == 1 && lost[0] != [2]int64{h.prefix, startLEO}) {
					return fmt.Errorf("lost+found %v, want [%d,%d) once", lost, h.prefix, startLEO)
				}
				return nil
			}
			err = p.Step(now, reply)
		}
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("no convergence")
}
