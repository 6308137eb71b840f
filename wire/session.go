package wire

import (
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FetchSession is one broker's KIP-227 incremental fetch session, kept as
// Kafka's client keeps it (FetchSessionHandler): the first Fetch is full
// (SessionID 0, SessionEpoch 0) and asks the broker to create a session;
// once it has, each next Fetch names only the partitions added or changed
// since the last one, and forgets (ForgottenTopics) those no longer
// fetched; the broker answers only the partitions with records, an error,
// or a changed high watermark or log start (the broker's
// FetchSession.CachedPartition.maybeUpdateResponseData), so an idle
// broker's long poll costs a few bytes instead of one entry per partition
// each way.
//
// Any failure (a request that got no answer, a response-level error such
// as FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH or
// FETCH_SESSION_TOPIC_ID_ERROR, a response that does not fit the session)
// makes the next Fetch full again, with a new session. A broker that
// answers a full Fetch with SessionID 0 has no session for us (sessions
// disabled, max.incremental.fetch.session.cache.slots=0, or its cache is
// full): every Fetch stays full, and, as Kafka's client does
// (FetchMetadata.INITIAL), each asks again, so a slot freed later is used.
//
// A session has one Fetch in the air at a time, as its epochs are
// sequential: a Fetch built while another is unanswered is a sessionless
// one (SessionID 0, SessionEpoch -1) that leaves the session alone.
//
// It is not safe for concurrent use; a worker owns its broker's session.
type FetchSession struct {
	off bool
	// id and epoch are the next request's: epoch 0 is a full request (id
	// 0 creates a session, another closes that one and creates a new one,
	// FetchMetadata.nextCloseExistingAttemptNew).
	id, epoch int32
	// parts is what the broker holds in the session for each partition:
	// what was last sent for it, and what it last answered.
	parts map[TopicPartition]sessionPart
	// inAir is set while a request of the session has no answer.
	inAir bool
}

type sessionPart struct {
	sent FetchPartition
	id   TopicID
	// hw and logStart are the last answered; -1 until an answer, and
	// after an error answer, as the broker resets its cached high
	// watermark so that it answers the partition again once the error
	// is gone.
	hw, logStart int64
}

// SessionFetch is how FetchSession.Request built one Fetch, to give back to
// Replies or Failed with its outcome.
type SessionFetch struct {
	inSession   bool // a request of the session (not a sessionless one)
	incremental bool
	named       int // partitions named in the request
}

// Incremental reports whether the Fetch was incremental: it named only the
// partitions added or changed since the session's last Fetch.
func (f SessionFetch) Incremental() bool { return f.incremental }

// Named is the number of partitions the Fetch named.
func (f SessionFetch) Named() int { return f.named }

// NewFetchSession returns a broker's session; with enabled false, every
// Fetch is sessionless (SessionID 0, SessionEpoch -1) and full.
func NewFetchSession(enabled bool) *FetchSession {
	return &FetchSession{off: !enabled}
}

// Request builds the Fetch of the partitions fs, in order (see
// FetchRequestInOrder): full, or incremental when the session allows it.
// Every partition of fs is fetched either way: a partition the request does
// not name is fetched from what the session holds for it, which is the
// same.
func (s *FetchSession) Request(order []TopicPartition, fs map[TopicPartition]FetchPartition, ids map[string]TopicID, lim FetchLimits) (*kmsg.FetchRequest, SessionFetch) {
	if s.off || s.inAir {
		return FetchRequestInOrder(order, fs, ids, lim), SessionFetch{named: len(fs)}
	}
	s.inAir = true
	if s.epoch != 0 && s.replaced(fs, ids) {
		// A topic recreated under its name: forgetting the old id and
		// adding the new one in one request is only possible by id
		// (v13+, FetchRequest.Builder puts replaced partitions in
		// toForget only then), and the version is chosen when the
		// request is written; a new session is right for both.
		s.epoch = 0
	}
	if s.epoch == 0 {
		s.parts = make(map[TopicPartition]sessionPart, len(fs))
		for tp, f := range fs {
			s.parts[tp] = sessionPart{sent: f, id: ids[tp.Topic], hw: -1, logStart: -1}
		}
		req := FetchRequestInOrder(order, fs, ids, lim)
		req.SessionID, req.SessionEpoch = s.id, 0
		return req, SessionFetch{inSession: true, named: len(fs)}
	}
	// FetchSessionHandler.Builder.build: added and altered partitions are
	// sent, in the order given; removed ones are forgotten.
	send := make([]TopicPartition, 0, len(order))
	for _, tp := range order {
		f, ok := fs[tp]
		if !ok {
			continue
		}
		sp, held := s.parts[tp]
		if held && sp.sent == f {
			continue
		}
		if !held {
			sp = sessionPart{id: ids[tp.Topic], hw: -1, logStart: -1}
		}
		sp.sent = f
		s.parts[tp] = sp
		send = append(send, tp)
	}
	var forget []TopicPartition
	for tp := range s.parts {
		if _, ok := fs[tp]; !ok {
			forget = append(forget, tp)
		}
	}
	req := FetchRequestInOrder(send, fs, ids, lim)
	req.SessionID, req.SessionEpoch = s.id, s.epoch
	sort.Slice(forget, func(i, j int) bool {
		a, b := forget[i], forget[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	for _, tp := range forget {
		if n := len(req.ForgottenTopics); n == 0 || req.ForgottenTopics[n-1].Topic != tp.Topic {
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.TopicID = tp.Topic, s.parts[tp].id // kmsg writes the name before v13, the id from it
			req.ForgottenTopics = append(req.ForgottenTopics, ft)
		}
		ft := &req.ForgottenTopics[len(req.ForgottenTopics)-1]
		ft.Partitions = append(ft.Partitions, tp.Partition)
		delete(s.parts, tp)
	}
	return req, SessionFetch{inSession: true, incremental: true, named: len(send)}
}

// replaced reports whether a partition of fs the session holds has a new
// topic id.
func (s *FetchSession) replaced(fs map[TopicPartition]FetchPartition, ids map[string]TopicID) bool {
	for tp := range fs {
		if sp, ok := s.parts[tp]; ok && sp.id != ids[tp.Topic] {
			return true
		}
	}
	return false
}

// Quiet takes the answer to a Fetch of n partitions built by Request (or
// Again) when it is an incremental one that names no partition, in a
// session that holds those n and vouches for each (answered before, and
// not with an error): every partition is then as the session last saw
// it, which is what Replies would answer for each, and the session moves
// on as Replies would move it. For any other answer it reports false and changes
// nothing: give that one to Replies. An idle broker answers every long
// poll so; at thousands of partitions, an answer built for each of them
// and taken by the worker one by one was most of an idle kfollower's CPU
// (issue 14).
func (s *FetchSession) Quiet(resp *kmsg.FetchResponse, sent SessionFetch, n int) bool {
	if !sent.inSession || !sent.incremental || resp.ErrorCode != 0 || resp.SessionID == 0 || len(resp.Topics) > 0 || len(s.parts) != n {
		return false
	}
	for _, sp := range s.parts {
		if sp.hw < 0 {
			return false // Replies reports it missing
		}
	}
	s.inAir = false
	s.epoch = nextEpoch(s.epoch)
	return true
}

// Again builds the next Fetch after one whose answer Quiet took, for the
// same partitions, unchanged: the incremental Fetch naming none that
// Request would build from them, without looking at each.
func (s *FetchSession) Again(lim FetchLimits) (*kmsg.FetchRequest, SessionFetch) {
	s.inAir = true
	req := FetchRequestInOrder(nil, nil, nil, lim)
	req.SessionID, req.SessionEpoch = s.id, s.epoch
	return req, SessionFetch{inSession: true, incremental: true}
}

// Failed is told that the Fetch sent got no answer: the next is full, with
// a new session (FetchSessionHandler.handleError).
func (s *FetchSession) Failed(sent SessionFetch) {
	if sent.inSession {
		s.inAir = false
		s.restart(false)
	}
}

// restart makes the next request full. With forgotten, the broker has no
// session of that id (FETCH_SESSION_ID_NOT_FOUND) or none was made, so the
// next asks for a new one; otherwise it closes the old one as well.
func (s *FetchSession) restart(forgotten bool) {
	if forgotten {
		s.id = 0
	}
	s.epoch, s.parts = 0, nil
}

// Replies is FetchReplies for a Fetch built by Request, fs being the
// partitions given to Request. A partition an incremental response leaves
// out has nothing new: it is answered as the session last saw it (no
// records, no error, the high watermark and log start last answered), so
// that its fetch is not left waiting; only a partition the session cannot
// vouch for is reported in missing.
func (s *FetchSession) Replies(resp *kmsg.FetchResponse, sent SessionFetch, fs map[TopicPartition]FetchPartition, ids map[string]TopicID) (answers map[TopicPartition]FetchAnswer, missing []TopicPartition) {
	answers, missing = FetchReplies(resp, fs, ids)
	if !sent.inSession {
		return answers, missing
	}
	s.inAir = false
	if resp.ErrorCode != 0 {
		// FetchSessionHandler.handleResponse: every partition is failed
		// with the code (above), and the next request is full.
		s.restart(resp.ErrorCode == kerr.FetchSessionIDNotFound.Code)
		return answers, missing
	}
	for tp, a := range answers {
		if sp, ok := s.parts[tp]; ok {
			// CachedPartition.maybeUpdateResponseData.
			sp.hw, sp.logStart = a.HighWatermark, a.LogStartOffset
			if a.ErrorCode != 0 {
				sp.hw, sp.logStart = -1, -1
			}
			s.parts[tp] = sp
		}
	}
	switch {
	case !sent.incremental:
		if len(missing) > 0 || resp.SessionID == 0 {
			// A full response must answer every partition
			// (verifyFullFetchResponsePartitions): the next request
			// closes the session it made, if any. SessionID 0: no
			// session was made; the next asks again.
			s.id = resp.SessionID
			s.restart(false)
			return answers, missing
		}
		s.id, s.epoch = resp.SessionID, 1
		return answers, missing
	case s.extra(resp, ids):
		// verifyIncrementalFetchResponsePartitions: the broker's session
		// is not the one we keep, so its silence cannot be trusted.
		s.restart(false)
		return answers, missing
	}
	still := missing[:0]
	for _, tp := range missing {
		sp, ok := s.parts[tp]
		if !ok || sp.hw < 0 {
			still = append(still, tp)
			continue
		}
		answers[tp] = FetchAnswer{HighWatermark: sp.hw, LogStartOffset: sp.logStart, Diverging: EpochEndOffset{Epoch: -1, EndOffset: -1}}
	}
	if resp.SessionID == 0 {
		s.restart(true) // the broker closed the session
	} else {
		s.epoch = nextEpoch(s.epoch)
	}
	return answers, still
}

// extra reports whether resp answers a partition the session does not hold.
func (s *FetchSession) extra(resp *kmsg.FetchResponse, ids map[string]TopicID) bool {
	names := make(map[TopicID]string, len(ids))
	for n, id := range ids {
		names[id] = n
	}
	for _, t := range resp.Topics {
		name := t.Topic
		if name == "" {
			name = names[t.TopicID]
		}
		for _, p := range t.Partitions {
			if _, ok := s.parts[TopicPartition{name, p.Partition}]; !ok {
				return true
			}
		}
	}
	return false
}

// nextEpoch is FetchMetadata.nextEpoch: 1 follows the largest epoch, as 0
// means a full request.
func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}
