package server

import (
	"context"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch (key 1): v4-18. Broker side: KafkaApis.handleFetchRequest,
// ReplicaManager.fetchMessages and readFromLog, Partition.readRecords,
// DelayedFetch (docs/kafka.md §1.2, §5.1, §12).
//
//   - Sessionless only (KIP-227): the answer's session id is always 0, as
//     from a broker whose session cache has no slots; an incremental
//     request (session epoch other than 0 or -1) gets
//     FETCH_SESSION_ID_NOT_FOUND, and kgo and the Java client fall back to
//     full requests (FetchManager.newContext).
//   - A broker replica id (>= 0; v15+ from ReplicaState): every partition
//     is TOPIC_AUTHORIZATION_FAILED, as for a follower without
//     CLUSTER_ACTION. Replica ids -1 and -2 read alike.
//   - v13+ names topics by id: an unknown id is UNKNOWN_TOPIC_ID; an
//     unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION; one not served
//     NOT_LEADER_OR_FOLLOWER.
//   - The CurrentLeaderEpoch fence (v9+, KIP-320) against the served
//     epoch; on v16+ a fenced partition names this broker and the served
//     epoch as its leader (KIP-951).
//   - LastFetchedEpoch (v12+), as Partition.readRecords: an epoch this copy
//     cannot place is OFFSET_OUT_OF_RANGE; one whose end here is before the
//     fetch offset, or that ends in an older epoch, is DivergingEpoch with
//     no records.
//   - Below the log start or above the log end: OFFSET_OUT_OF_RANGE;
//     between the high watermark and the log end: no records, no error.
//   - High watermark = DurableEnd; no batch at or past it is served.
//   - Size limits (KIP-74): the response's records are capped by
//     min(MaxBytes, Config.FetchMaxBytes), each partition's by
//     PartitionMaxBytes, except that the first batch of the first partition
//     with data is returned whole. Only whole batches are returned.
//   - v4-9 (no zstd before v10): a read holding a zstd batch is
//     UNSUPPORTED_COMPRESSION_TYPE (Kafka decides by the topic's config;
//     this copy has none, so by the batches).
//   - A storage error is KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER before
//     v6 (maybeDownConvertStorageError).
//   - Long poll: answered at once when MaxWait <= 0, MinBytes are there,
//     or any partition has a read error or diverges; otherwise read again
//     on every Server.Notify of a requested partition until MinBytes or
//     MaxWait.
//   - LastStableOffset is Log.LastStableOffset (at most the high
//     watermark) at every isolation level, as Kafka reports it. Under
//     read_committed (isolation 1) no batch at or past it is served, and
//     AbortedTransactions lists those that may hold records in the range
//     served, [FetchOffset, the offset after the last batch served)
//     (LocalLog.read with TXN_COMMITTED, UnifiedLog
//     .collectAbortedTransactions; Kafka's upper bound is the next index
//     entry after the bytes read, which can list more, never fewer).
//     Under read_uncommitted it is null. PreferredReadReplica -1.
//
// Records (v10+) are sections of the segment files, sent without a copy
// (doc.go, Sending records); below v10 they are read into memory, CRC
// checked, to see their codecs.
//
// Not as Kafka: a partition's records may come from several segments
// (Kafka stops at the end of one), which fills MinBytes sooner.

func init() { register(1, 4, handleFetch) }

// fetchPart is one requested partition, with the place of its answer.
type fetchPart struct {
	topic string
	req   *kmsg.FetchRequestTopicPartition
	resp  *kmsg.FetchResponseTopicPartition
	// pre is an error known before reading (the topic or partition does
	// not exist, a broker replica id): it is answered as it is, and, as in
	// Kafka, does not end a long poll.
	pre *kerr.Error
	// recs are the records read (v10+), sent from the log's files
	// (fetch_frame.go); nil when they are resp.RecordBatches.
	recs []Section
}

func handleFetch(ctx context.Context, cc *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if req.Version >= 7 && req.SessionEpoch != 0 && req.SessionEpoch != -1 {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, nil
	}
	s := cc.s
	parts := s.resolveFetch(req, resp)
	cc.authorizeFetch(parts)

	maxBytes := int(s.cfg.FetchMaxBytes)
	if req.Version >= 3 {
		maxBytes = max(0, min(maxBytes, int(req.MaxBytes)))
	}
	minBytes := min(int(req.MinBytes), maxBytes)
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond

	var tps []topicPartition
	for _, p := range parts {
		if p.pre == nil {
			tps = append(tps, topicPartition{p.topic, p.req.Partition})
		}
	}
	if len(tps) == 0 {
		wait = 0
	}
	var w *waiter
	if wait > 0 {
		w = s.waits.add(tps)
		defer s.waits.remove(w)
	}
	var timer *time.Timer
	for {
		n, urgent := s.readFetch(req, parts, maxBytes)
		if wait <= 0 || urgent || n >= minBytes {
			break
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-w.wake:
			continue
		case <-timer.C:
			s.readFetch(req, parts, maxBytes)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		break
	}
	s.fillLeaders(req, resp, cc.adv)
	cc.fetchRecs = cc.fetchRecs[:0]
	for i := range parts {
		cc.fetchRecs = append(cc.fetchRecs, parts[i].recs)
	}
	return resp, nil
}

// resolveFetch lays out the answer, one partition for each requested one
// in request order, and finds the errors known before any read.
func (s *Server) resolveFetch(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) []fetchPart {
	replica := req.ReplicaID
	if req.Version >= 15 {
		replica = req.ReplicaState.ID
	}
	topics := s.cfg.Catalog.Topics()
	counts := make(map[string]int32, len(topics))
	byID := map[[16]byte]string{}
	for _, t := range topics {
		counts[t.Name] = t.Partitions
		if req.Version >= 13 {
			byID[t.ID] = t.Name
		}
	}
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	var parts []fetchPart
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := &resp.Topics[i]
		t.Default()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		name, pre := rt.Topic, (*kerr.Error)(nil)
		if req.Version >= 13 {
			var ok bool
			if name, ok = byID[rt.TopicID]; !ok || rt.TopicID == ([16]byte{}) {
				pre = kerr.UnknownTopicID
			}
		}
		if replica >= 0 {
			pre = kerr.TopicAuthorizationFailed
		}
		t.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			p := fetchPart{topic: name, req: rp, resp: &t.Partitions[j], pre: pre}
			if n, ok := counts[name]; p.pre == nil && (!ok || rp.Partition < 0 || rp.Partition >= n) {
				p.pre = kerr.UnknownTopicOrPartition
			}
			resetPartition(p.resp, rp.Partition)
			if p.pre != nil {
				p.resp.ErrorCode = p.pre.Code
			}
			parts = append(parts, p)
		}
	}
	return parts
}

// resetPartition is an answer with no records and every offset unknown,
// what Kafka's error answers carry (ReplicaManager.createLogReadResult).
func resetPartition(p *kmsg.FetchResponseTopicPartition, partition int32) {
	p.Default()
	p.Partition = partition
	p.HighWatermark = -1
	p.PreferredReadReplica = -1
	p.RecordBatches = []byte{}
}

// readFetch reads every partition without a known error, in request
// order, with the response's byte budget; it returns the record bytes read
// and whether any partition must be answered now (a read error or a
// divergence).
func (s *Server) readFetch(req *kmsg.FetchRequest, parts []fetchPart, maxBytes int) (n int, urgent bool) {
	limit, minOne := maxBytes, true
	for i := range parts {
		p := &parts[i]
		if p.pre != nil {
			continue
		}
		resetPartition(p.resp, p.req.Partition)
		p.recs = nil
		budget := min(limit, max(0, int(p.req.PartitionMaxBytes)))
		got, now := s.readPartition(req, p, budget, minOne)
		urgent = urgent || now
		if got > 0 {
			minOne = false
		}
		n += got
		limit = max(0, limit-got)
	}
	return n, urgent
}

// readPartition answers one partition into p.resp, as Partition.readRecords
// and LocalLog.read do.
func (s *Server) readPartition(req *kmsg.FetchRequest, p *fetchPart, limit int, minOne bool) (n int, urgent bool) {
	r, rp := p.resp, p.req
	fail := func(err *kerr.Error) (int, bool) {
		resetPartition(r, rp.Partition)
		r.ErrorCode = err.Code
		return 0, true
	}
	part, ok := s.lookup(p.topic, rp.Partition)
	if !ok {
		return fail(kerr.NotLeaderForPartition)
	}
	if err := part.fence(rp.CurrentLeaderEpoch, req.Version >= 9 && rp.CurrentLeaderEpoch >= 0); err != nil {
		fail(err)
		if err == kerr.FencedLeaderEpoch && req.Version >= 16 {
			r.CurrentLeader.LeaderID, r.CurrentLeader.LeaderEpoch = s.cfg.NodeID, part.epoch
		}
		return 0, true
	}
	// moved answers an out-of-range offset or a failed read as a broker
	// would after a truncation that ran while this request read: the
	// Catalog unserves a partition while it truncates and serves it again
	// at a higher epoch, so if the lookup changed, the client is told to
	// find the leader again (or is fenced, when it named the old epoch)
	// and then validates its position with OffsetsForLeaderEpoch, instead
	// of resetting on an OFFSET_OUT_OF_RANGE the truncation caused.
	moved := func(otherwise *kerr.Error) (int, bool) {
		now, ok := s.lookup(p.topic, rp.Partition)
		switch {
		case !ok:
			return fail(kerr.NotLeaderForPartition)
		case now.epoch != part.epoch:
			if err := now.fence(rp.CurrentLeaderEpoch, req.Version >= 9 && rp.CurrentLeaderEpoch >= 0); err != nil {
				return fail(err)
			}
			return fail(kerr.NotLeaderForPartition)
		}
		return fail(otherwise)
	}
	l := part.log
	start := l.LogStartOffset()
	hw := l.DurableEnd()
	lso := min(l.LastStableOffset(), hw) // read after hw, which it may have passed since
	leo := max(l.LogEndOffset(), hw)
	committed := req.IsolationLevel == 1
	offsets := func() {
		r.HighWatermark, r.LastStableOffset, r.LogStartOffset = hw, lso, start
		if committed {
			r.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
		}
	}
	if rp.LastFetchedEpoch >= 0 && req.Version >= 12 {
		epoch, end := part.endOffsetFor(rp.LastFetchedEpoch)
		switch {
		case epoch < 0 || end < 0, rp.FetchOffset < start:
			return moved(kerr.OffsetOutOfRange)
		case epoch < rp.LastFetchedEpoch || end < rp.FetchOffset:
			offsets()
			r.DivergingEpoch.Epoch, r.DivergingEpoch.EndOffset = epoch, end
			return 0, true
		}
	}
	if rp.FetchOffset < start || rp.FetchOffset > leo {
		return moved(kerr.OffsetOutOfRange)
	}
	end := hw
	if committed {
		end = lso
	}
	var (
		records []byte
		secs    []Section
		next    int64
		err     error
	)
	if req.Version >= 10 {
		secs, n, next, err = readSections(l, rp.FetchOffset, end, limit, minOne)
	} else {
		// Read into memory, to see the codecs.
		records, next, err = readRange(l, rp.FetchOffset, end, limit, minOne)
		n = len(records)
	}
	if err != nil {
		if rp.FetchOffset < l.LogStartOffset() {
			return moved(kerr.OffsetOutOfRange) // retention passed it meanwhile
		}
		s.log.Warn("Fetch: reading the log", "topic", p.topic, "partition", rp.Partition, "offset", rp.FetchOffset, "err", err)
		if req.Version <= 5 {
			return moved(kerr.NotLeaderForPartition)
		}
		return moved(kerr.KafkaStorageError)
	}
	if req.Version < 10 && holdsZstd(records) {
		return fail(kerr.UnsupportedCompressionType)
	}
	offsets()
	if committed && n > 0 {
		for _, a := range l.AbortedTransactions(rp.FetchOffset, next) {
			t := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			t.ProducerID, t.FirstOffset = a.ProducerID, a.FirstOffset
			r.AbortedTransactions = append(r.AbortedTransactions, t)
		}
	}
	if records != nil {
		r.RecordBatches = records
	}
	p.recs = secs
	return n, false
}

// readSections is readRange as sections of the log's files: whole batches
// from the one holding from, none at or past end, at most limit bytes of
// them but the first whatever its size when minOne is set; n is their
// size and next the offset after the last (from when none).
func readSections(l Log, from, end int64, limit int, minOne bool) (secs []Section, n int, next int64, _ error) {
	next = from
	for next < end {
		first := minOne && n == 0
		if limit-n <= 0 && !first {
			break
		}
		s, after, err := l.ReadSection(next, max(limit-n, 0), end, first)
		if err != nil {
			if n > 0 {
				return secs, n, next, nil // the next fetch reports it
			}
			return nil, 0, from, err
		}
		if s == nil {
			break
		}
		secs = append(secs, s)
		n += s.Len()
		if after <= next {
			break
		}
		next = after
	}
	return secs, n, next, nil
}

// readRange reads whole batches from the one holding from, none at or past
// end, at most limit bytes of them, but the first whatever its size when
// minOne is set. next is the offset after the last batch read (from when
// none is).
func readRange(l Log, from, end int64, limit int, minOne bool) (_ []byte, next int64, _ error) {
	var out []byte
	readTo := from
	for off := from; off < end; {
		room := limit - len(out)
		if room <= 0 && !(minOne && len(out) == 0) {
			break
		}
		b, err := l.Read(off, max(room, 1))
		if err != nil {
			if len(out) > 0 {
				return out, readTo, nil // the next fetch reports it
			}
			return nil, from, err
		}
		take := 0
		next := off
		s := batch.NewFrameScanner(b)
		for s.Next() {
			h := s.Header()
			if h.BaseOffset >= end || len(out)+take+h.Size() > limit && !(minOne && len(out)+take == 0) {
				break
			}
			take += h.Size()
			next = h.NextOffset()
		}
		if take == 0 {
			break
		}
		if out == nil {
			out = b[:take:take]
		} else {
			out = append(out, b[:take]...)
		}
		readTo = next
		if next <= off || take < len(b) {
			break
		}
		off = next
	}
	if out == nil {
		out = []byte{}
	}
	return out, readTo, nil
}

func holdsZstd(records []byte) bool {
	s := batch.NewFrameScanner(records)
	for s.Next() {
		if s.Header().Attributes.Compression() == batch.CompressionZstd {
			return true
		}
	}
	return false
}

// fillLeaders adds this broker to the answer's node endpoints (v16+) when a
// partition names it as its leader (KIP-951).
func (s *Server) fillLeaders(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, adv broker) {
	if req.Version < 16 {
		return
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.CurrentLeader.LeaderID == s.cfg.NodeID {
				b := kmsg.NewFetchResponseBroker()
				b.NodeID, b.Host, b.Port = s.cfg.NodeID, adv.host, adv.port
				resp.Brokers = []kmsg.FetchResponseBroker{b}
				return
			}
		}
	}
}
