package wire

import (
	"math"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The session's rules, case by case as Kafka's FetchSessionHandlerTest
// checks its handler: what each request names and forgets, with which
// SessionID and SessionEpoch, and how each kind of answer moves the next.

var sessionIDs = map[string]TopicID{"a": idA, "b": idB}

func fetchAt(off int64) FetchPartition {
	return FetchPartition{Offset: off, CurrentLeaderEpoch: 3, LastFetchedEpoch: 2, LogStartOffset: 0}
}

// part is one partition of a test response.
type part struct {
	tp           TopicPartition
	hw, logStart int64
	code         int16
	records      []byte
	byIDOnly     bool
}

func sessionResponse(sessionID int32, parts ...part) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.SessionID = sessionID
	for _, p := range parts {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = p.tp.Topic, sessionIDs[p.tp.Topic]
		if p.byIDOnly {
			rt.Topic = ""
		}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark, rp.LogStartOffset, rp.ErrorCode, rp.RecordBatches = p.tp.Partition, p.hw, p.logStart, p.code, p.records
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// named lists the partitions a request names, in request order.
func named(req *kmsg.FetchRequest) []TopicPartition {
	var out []TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			out = append(out, TopicPartition{t.Topic, p.Partition})
		}
	}
	return out
}

func forgotten(req *kmsg.FetchRequest) []TopicPartition {
	var out []TopicPartition
	for _, t := range req.ForgottenTopics {
		for _, p := range t.Partitions {
			out = append(out, TopicPartition{t.Topic, p})
		}
	}
	return out
}

func checkMeta(t *testing.T, req *kmsg.FetchRequest, id, epoch int32) {
	t.Helper()
	if req.SessionID != id || req.SessionEpoch != epoch {
		t.Fatalf("request has session %d epoch %d, want %d epoch %d", req.SessionID, req.SessionEpoch, id, epoch)
	}
}

func checkTPs(t *testing.T, what string, got, want []TopicPartition) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s %v, want %v", what, got, want)
	}
}

var order3 = []TopicPartition{tpA0, tpA1, tpB0}

// established returns a session the broker granted id 7 with a full
// request of a-0, a-1 and b-0 at offset 10, answered high watermark 20 and
// log start 5 for each.
func established(t *testing.T) (*FetchSession, map[TopicPartition]FetchPartition) {
	t.Helper()
	s := NewFetchSession(true)
	fs := map[TopicPartition]FetchPartition{tpA0: fetchAt(10), tpA1: fetchAt(10), tpB0: fetchAt(10)}
	req, sf := s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	checkMeta(t, req, 0, 0)
	checkTPs(t, "full request names", named(req), order3)
	if sf.Incremental() || sf.Named() != 3 {
		t.Fatalf("full request: incremental %v named %d", sf.Incremental(), sf.Named())
	}
	answers, missing := s.Replies(sessionResponse(7, part{tp: tpA0, hw: 20, logStart: 5}, part{tp: tpA1, hw: 20, logStart: 5}, part{tp: tpB0, hw: 20, logStart: 5}), sf, fs, sessionIDs)
	if len(answers) != 3 || len(missing) != 0 {
		t.Fatalf("full response: %d answers, missing %v", len(answers), missing)
	}
	return s, fs
}

// An unchanged set of partitions is an incremental request that names
// none; the partitions the response leaves out are answered from the
// session, and the epoch goes up by one each time.
func TestFetchSessionIncremental(t *testing.T) {
	s, fs := established(t)
	for epoch := int32(1); epoch <= 3; epoch++ {
		req, sf := s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
		checkMeta(t, req, 7, epoch)
		checkTPs(t, "unchanged incremental names", named(req), nil)
		checkTPs(t, "unchanged incremental forgets", forgotten(req), nil)
		if !sf.Incremental() || sf.Named() != 0 {
			t.Fatalf("incremental %v named %d", sf.Incremental(), sf.Named())
		}
		// b-0 got records; a-0 and a-1 are left out.
		answers, missing := s.Replies(sessionResponse(7, part{tp: tpB0, hw: 30, logStart: 5, records: []byte{}}), sf, fs, sessionIDs)
		if len(missing) != 0 {
			t.Fatalf("epoch %d: missing %v", epoch, missing)
		}
		for _, tp := range []TopicPartition{tpA0, tpA1} {
			want := FetchAnswer{HighWatermark: 20, LogStartOffset: 5, Diverging: EpochEndOffset{-1, -1}}
			if a := answers[tp]; a.ErrorCode != 0 || a.HighWatermark != want.HighWatermark || a.LogStartOffset != want.LogStartOffset || a.Diverging != want.Diverging || len(a.Records) != 0 {
				t.Fatalf("epoch %d: %s answered %+v, want %+v", epoch, tp, a, want)
			}
		}
		if a := answers[tpB0]; a.HighWatermark != 30 {
			t.Fatalf("epoch %d: b-0 answered %+v", epoch, a)
		}
	}
	// b-0's new high watermark is what a later omission repeats.
	req, sf := s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	answers, _ := s.Replies(sessionResponse(7), sf, fs, sessionIDs)
	checkMeta(t, req, 7, 4)
	if a := answers[tpB0]; a.HighWatermark != 30 {
		t.Fatalf("b-0 implied %+v, want the high watermark 30 last answered", a)
	}
}

// FetchSessionHandler.Builder: an altered partition (here a new offset,
// then a new leader epoch) and an added one are named, in the order given;
// a removed one is forgotten, by name before v13 and by id from it.
func TestFetchSessionAddAlterRemove(t *testing.T) {
	s, _ := established(t)
	tpB1 := TopicPartition{"b", 1}
	next := map[TopicPartition]FetchPartition{tpB1: fetchAt(0), tpA0: fetchAt(11), tpB0: fetchAt(10)}
	order := []TopicPartition{tpB1, tpA0, tpB0}
	req, sf := s.Request(order, next, sessionIDs, DefaultFetchLimits)
	checkMeta(t, req, 7, 1)
	checkTPs(t, "names", named(req), []TopicPartition{tpB1, tpA0})
	checkTPs(t, "forgets", forgotten(req), []TopicPartition{tpA1})
	if sf.Named() != 2 {
		t.Fatalf("named %d, want 2", sf.Named())
	}
	for _, v := range []int16{12, 13, 17} {
		got := roundTrip(t, req, v, kmsg.NewPtrFetchRequest())
		if len(got.ForgottenTopics) != 1 || !slices.Equal(got.ForgottenTopics[0].Partitions, []int32{1}) {
			t.Fatalf("v%d: forgotten %+v", v, got.ForgottenTopics)
		}
		ft := got.ForgottenTopics[0]
		if v < 13 && ft.Topic != "a" || v >= 13 && ft.TopicID != idA {
			t.Fatalf("v%d: forgotten topic %q id %v, want a by %s", v, ft.Topic, ft.TopicID, map[bool]string{true: "name", false: "id"}[v < 13])
		}
		if got.SessionID != 7 || got.SessionEpoch != 1 {
			t.Fatalf("v%d: session %d epoch %d", v, got.SessionID, got.SessionEpoch)
		}
	}
	// b-1 is new to the broker's session, which answers it first time; a-0
	// and b-0 had nothing new.
	answers, missing := s.Replies(sessionResponse(7, part{tp: tpB1, hw: 4, logStart: 0}), sf, next, sessionIDs)
	if len(missing) != 0 || len(answers) != 3 || answers[tpA0].HighWatermark != 20 || answers[tpB1].HighWatermark != 4 {
		t.Fatalf("answers %+v, missing %v", answers, missing)
	}
	// A new CurrentLeaderEpoch alters the partition as a new offset does.
	f := next[tpB0]
	f.CurrentLeaderEpoch++
	next[tpB0] = f
	req, _ = s.Request(order, next, sessionIDs, DefaultFetchLimits)
	checkMeta(t, req, 7, 2)
	checkTPs(t, "names after a new leader epoch", named(req), []TopicPartition{tpB0})
	checkTPs(t, "forgets", forgotten(req), nil)
}

// The partition an incremental response leaves out is vouched for only if
// the session has an answer for it: after an error answer (the broker
// resets its cached high watermark to -1 so that it answers again) it is
// missing, as is a partition just added.
func TestFetchSessionOmittedUnknown(t *testing.T) {
	s, fs := established(t)
	req, sf := s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	checkMeta(t, req, 7, 1)
	s.Replies(sessionResponse(7, part{tp: tpA1, hw: -1, logStart: -1, code: kerr.NotLeaderForPartition.Code}), sf, fs, sessionIDs)
	tpB1 := TopicPartition{"b", 1}
	fs[tpB1] = fetchAt(0)
	order := append(slices.Clone(order3), tpB1)
	req, sf = s.Request(order, fs, sessionIDs, DefaultFetchLimits)
	checkTPs(t, "names", named(req), []TopicPartition{tpB1})
	_, missing := s.Replies(sessionResponse(7), sf, fs, sessionIDs)
	slices.SortFunc(missing, compareTP)
	checkTPs(t, "missing", missing, []TopicPartition{tpA1, tpB1})
}

// A broker that answers a full request with SessionID 0 made no session:
// every request stays full, each asking again (FetchMetadata.INITIAL), and
// a broker that grants one later is used.
func TestFetchSessionRefused(t *testing.T) {
	s := NewFetchSession(true)
	fs := map[TopicPartition]FetchPartition{tpA0: fetchAt(10)}
	for range 3 {
		req, sf := s.Request([]TopicPartition{tpA0}, fs, sessionIDs, DefaultFetchLimits)
		checkMeta(t, req, 0, 0)
		checkTPs(t, "names", named(req), []TopicPartition{tpA0})
		if _, missing := s.Replies(sessionResponse(0, part{tp: tpA0, hw: 20}), sf, fs, sessionIDs); len(missing) != 0 {
			t.Fatalf("missing %v", missing)
		}
	}
	_, sf := s.Request([]TopicPartition{tpA0}, fs, sessionIDs, DefaultFetchLimits)
	s.Replies(sessionResponse(9, part{tp: tpA0, hw: 20}), sf, fs, sessionIDs)
	req, _ := s.Request([]TopicPartition{tpA0}, fs, sessionIDs, DefaultFetchLimits)
	checkMeta(t, req, 9, 1)
}

// Disabled, every request is sessionless and full (SessionEpoch -1).
func TestFetchSessionDisabled(t *testing.T) {
	s := NewFetchSession(false)
	fs := map[TopicPartition]FetchPartition{tpA0: fetchAt(10), tpA1: fetchAt(10), tpB0: fetchAt(10)}
	for range 2 {
		req, sf := s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
		checkMeta(t, req, 0, -1)
		checkTPs(t, "names", named(req), order3)
		// Even a broker that (wrongly) names a session does not start one.
		_, missing := s.Replies(sessionResponse(7), sf, fs, sessionIDs)
		slices.SortFunc(missing, compareTP)
		checkTPs(t, "missing", missing, order3)
	}
}

// Every failure makes the next request full. FETCH_SESSION_ID_NOT_FOUND
// asks for a new session (id 0); INVALID_FETCH_SESSION_EPOCH,
// FETCH_SESSION_TOPIC_ID_ERROR and a request with no answer also close the
// old one (its id, epoch 0). The response-level error fails every
// partition with its code.
func TestFetchSessionErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		code   int16 // 0: no answer at all
		nextID int32
	}{
		{"FETCH_SESSION_ID_NOT_FOUND", kerr.FetchSessionIDNotFound.Code, 0},
		{"INVALID_FETCH_SESSION_EPOCH", kerr.InvalidFetchSessionEpoch.Code, 7},
		{"FETCH_SESSION_TOPIC_ID_ERROR", kerr.FetchSessionTopicIDError.Code, 7},
		{"no answer", 0, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, fs := established(t)
			req, sf := s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
			checkMeta(t, req, 7, 1)
			if c.code == 0 {
				s.Failed(sf)
			} else {
				resp := sessionResponse(0)
				resp.ErrorCode = c.code
				answers, _ := s.Replies(resp, sf, fs, sessionIDs)
				for _, tp := range order3 {
					if answers[tp].ErrorCode != c.code {
						t.Fatalf("%s answered %+v", tp, answers[tp])
					}
				}
			}
			req, _ = s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
			checkMeta(t, req, c.nextID, 0)
			checkTPs(t, "full request names", named(req), order3)
		})
	}
}

// An incremental response naming a partition outside the session means the
// broker's session is not ours: nothing it left out is vouched for, and the
// next request is full, closing that session
// (verifyIncrementalFetchResponsePartitions). So is a full response
// lacking a partition (verifyFullFetchResponsePartitions).
func TestFetchSessionInvalidResponses(t *testing.T) {
	s, fs := established(t)
	_, sf := s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	_, missing := s.Replies(sessionResponse(7, part{tp: TopicPartition{"b", 5}, hw: 1}), sf, fs, sessionIDs)
	slices.SortFunc(missing, compareTP)
	checkTPs(t, "missing", missing, order3)
	req, sf := s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	checkMeta(t, req, 7, 0)

	_, missing = s.Replies(sessionResponse(8, part{tp: tpA0, hw: 20}, part{tp: tpA1, hw: 20}), sf, fs, sessionIDs)
	checkTPs(t, "missing from a full response", missing, []TopicPartition{tpB0})
	req, _ = s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	checkMeta(t, req, 8, 0)
}

// A v13+ response names topics by id alone; its partitions match the
// session's all the same.
func TestFetchSessionByTopicID(t *testing.T) {
	s, fs := established(t)
	_, sf := s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	answers, missing := s.Replies(sessionResponse(7, part{tp: tpB0, hw: 30, byIDOnly: true}), sf, fs, sessionIDs)
	if len(missing) != 0 || answers[tpB0].HighWatermark != 30 {
		t.Fatalf("answers %+v, missing %v", answers, missing)
	}
	req, _ := s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	checkMeta(t, req, 7, 2)
}

// A topic recreated under its name (a new id for a partition the session
// holds) starts a new session with a full request.
func TestFetchSessionTopicReplaced(t *testing.T) {
	s, fs := established(t)
	ids := map[string]TopicID{"a": {42}, "b": idB}
	req, _ := s.Request(order3, fs, ids, DefaultFetchLimits)
	checkMeta(t, req, 7, 0)
	checkTPs(t, "names", named(req), order3)
	if got := roundTrip(t, req, 13, kmsg.NewPtrFetchRequest()); got.Topics[0].TopicID != ids["a"] {
		t.Fatalf("topic id %v, want the new one", got.Topics[0].TopicID)
	}
}

// One request of the session at a time: one built while another is in the
// air is sessionless and leaves the session as it was.
func TestFetchSessionOneInAir(t *testing.T) {
	s, fs := established(t)
	req1, sf1 := s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	checkMeta(t, req1, 7, 1)
	moved := map[TopicPartition]FetchPartition{tpA0: fetchAt(15)}
	req2, sf2 := s.Request([]TopicPartition{tpA0}, moved, sessionIDs, DefaultFetchLimits)
	checkMeta(t, req2, 0, -1)
	checkTPs(t, "sessionless names", named(req2), []TopicPartition{tpA0})
	if _, missing := s.Replies(sessionResponse(0, part{tp: tpA0, hw: 25}), sf2, moved, sessionIDs); len(missing) != 0 {
		t.Fatalf("missing %v", missing)
	}
	s.Replies(sessionResponse(7), sf1, fs, sessionIDs)
	req3, _ := s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	checkMeta(t, req3, 7, 2)
	checkTPs(t, "names", named(req3), nil)
}

// FetchMetadata.nextEpoch: after the largest epoch comes 1, as 0 means a
// full request.
func TestFetchSessionEpochWraps(t *testing.T) {
	if got := nextEpoch(math.MaxInt32); got != 1 {
		t.Fatalf("nextEpoch(MaxInt32) = %d, want 1", got)
	}
	if got := nextEpoch(5); got != 6 {
		t.Fatalf("nextEpoch(5) = %d, want 6", got)
	}
}

// Quiet takes an incremental answer naming nothing, in a session that
// knows every partition's high watermark, as Replies would (the epoch goes
// up by one), and Again builds the next Fetch as Request would for the
// same partitions: incremental, naming and forgetting none. Anything else
// Quiet leaves to Replies, the session untouched: a full request's answer,
// an answer naming a partition or with a session-level error, a session
// the broker closed (SessionID 0), a partition the session cannot vouch
// for.
func TestFetchSessionQuiet(t *testing.T) {
	// Two sessions alike: one takes the answer by Quiet and builds the
	// next Fetch by Again, the other by Replies and Request.
	s, fs := established(t)
	r, _ := established(t)
	req, sf := s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	checkMeta(t, req, 7, 1)
	_, rsf := r.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	if !s.Quiet(sessionResponse(7), sf, 3) {
		t.Fatal("an empty incremental answer in a known session was not quiet")
	}
	if _, missing := r.Replies(sessionResponse(7), rsf, fs, sessionIDs); len(missing) != 0 {
		t.Fatalf("Replies: missing %v", missing)
	}
	again, asf := s.Again(DefaultFetchLimits)
	want, wsf := r.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	checkMeta(t, want, 7, 2)
	checkMeta(t, again, 7, 2)
	if len(again.Topics) != 0 || len(again.ForgottenTopics) != 0 || !asf.Incremental() || asf.Named() != 0 ||
		again.MaxWaitMillis != want.MaxWaitMillis || again.ReplicaID != want.ReplicaID || again.MaxBytes != want.MaxBytes || asf != wsf {
		t.Fatalf("Again built %+v (%+v), want what Request builds: %+v (%+v)", again, asf, want, wsf)
	}
	s.Replies(sessionResponse(7), asf, fs, sessionIDs)

	// A Fetch of other partitions than the session holds (the caller's
	// mistake): not quiet.
	_, sf = s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	if s.Quiet(sessionResponse(7), sf, 2) {
		t.Fatal("an answer to a Fetch of 2 partitions, the session holding 3, was taken as quiet")
	}
	s.Replies(sessionResponse(7), sf, fs, sessionIDs)

	for _, c := range []struct {
		name string
		resp *kmsg.FetchResponse
		sf   func() SessionFetch
	}{
		{"naming a partition", sessionResponse(7, part{tp: tpB0, hw: 30, logStart: 5}), nil},
		{"with an error", func() *kmsg.FetchResponse {
			r := sessionResponse(7)
			r.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
			return r
		}(), nil},
		{"closing the session", sessionResponse(0), nil},
		{"to a full request", sessionResponse(7), func() SessionFetch {
			n := NewFetchSession(true)
			_, sf := n.Request(order3, fs, sessionIDs, DefaultFetchLimits)
			return sf
		}},
	} {
		epoch := s.epoch
		req, sf := s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
		checkMeta(t, req, 7, epoch)
		if c.sf != nil {
			sf = c.sf()
		}
		if s.Quiet(c.resp, sf, 3) {
			t.Fatalf("an answer %s was taken as quiet", c.name)
		}
		if s.epoch != epoch || !s.inAir {
			t.Fatalf("Quiet refused an answer %s but moved the session (epoch %d → %d, in the air %v)", c.name, epoch, s.epoch, s.inAir)
		}
		s.Replies(c.resp, sf, fs, sessionIDs)
		if s.epoch == 0 {
			s, fs = established(t)
		}
	}

	// A partition whose last answer was an error: the session cannot
	// vouch for it, so an answer leaving it out is not quiet.
	s, fs = established(t)
	_, sf = s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	s.Replies(sessionResponse(7, part{tp: tpA1, hw: -1, logStart: -1, code: kerr.NotLeaderForPartition.Code}), sf, fs, sessionIDs)
	_, sf = s.Request(order3, fs, sessionIDs, DefaultFetchLimits)
	if s.Quiet(sessionResponse(7), sf, 3) {
		t.Fatal("an answer leaving out a partition the session cannot vouch for was taken as quiet")
	}
}
