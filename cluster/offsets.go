package cluster

import (
	"context"
	"fmt"

	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Query is one partition's question to its leader.
type Query struct {
	TP wire.TopicPartition
	// CurrentEpoch is the leader epoch Metadata named: only that leader
	// answers (KIP-320).
	CurrentEpoch int32
	// Epoch is the leader epoch asked about (OffsetsForLeaderEpoch only).
	Epoch int32
}

// Answer is its answer, or Err.
type Answer struct {
	Err error
	// Epoch is the largest epoch the leader holds at or below the one asked
	// about (OffsetsForLeaderEpoch only; docs/kafka.md §3.1).
	Epoch int32
	// Offset is where that epoch ends (OffsetsForLeaderEpoch), or the
	// leader's log start offset (LogStartOffsets).
	Offset int64
}

// OffsetsForLeaderEpoch sends one OffsetForLeaderEpoch request per broker
// for the queries given (grouped by leader), concurrently, as Kafka's
// fetcher threads batch theirs, built as the fetcher builds its own
// (wire.OffsetsForLeaderEpochRequest).
func OffsetsForLeaderEpoch(ctx context.Context, cl *kgo.Client, byBroker map[int32][]Query) map[wire.TopicPartition]Answer {
	asked := func(qs []Query) map[wire.TopicPartition]wire.EpochQuery {
		return wireQueries(qs, func(q Query) wire.EpochQuery {
			return wire.EpochQuery{CurrentLeaderEpoch: q.CurrentEpoch, LeaderEpoch: q.Epoch}
		})
	}
	return perBroker(ctx, cl, byBroker, "OffsetsForLeaderEpoch", func(qs []Query) kmsg.Request {
		return wire.OffsetsForLeaderEpochRequest(asked(qs))
	}, func(kr kmsg.Response, qs []Query, answer func(wire.TopicPartition, Answer, int16)) {
		as, _ := wire.OffsetsForLeaderEpochReplies(kr.(*kmsg.OffsetForLeaderEpochResponse), asked(qs))
		for tp, a := range as {
			answer(tp, Answer{Epoch: a.Epoch, Offset: a.EndOffset}, a.ErrorCode)
		}
	})
}

// LogStartOffsets asks each leader for the log start offset of its
// partitions (wire.LogStartRequest: ListOffsets EARLIEST as a consumer, so
// only the leader answers), one request per broker, fenced by
// CurrentEpoch; Epoch is not sent.
func LogStartOffsets(ctx context.Context, cl *kgo.Client, byBroker map[int32][]Query) map[wire.TopicPartition]Answer {
	asked := func(qs []Query) map[wire.TopicPartition]wire.ListOffsetsQuery {
		return wireQueries(qs, func(q Query) wire.ListOffsetsQuery {
			return wire.ListOffsetsQuery{CurrentLeaderEpoch: q.CurrentEpoch}
		})
	}
	return perBroker(ctx, cl, byBroker, "ListOffsets", func(qs []Query) kmsg.Request {
		return wire.LogStartRequest(asked(qs))
	}, func(kr kmsg.Response, qs []Query, answer func(wire.TopicPartition, Answer, int16)) {
		as, _ := wire.ListedOffsets(kr.(*kmsg.ListOffsetsResponse), asked(qs))
		for tp, a := range as {
			answer(tp, Answer{Offset: a.Offset}, a.ErrorCode)
		}
	})
}

// wireQueries keys queries by partition in wire's form.
func wireQueries[Q any](qs []Query, to func(Query) Q) map[wire.TopicPartition]Q {
	m := make(map[wire.TopicPartition]Q, len(qs))
	for _, q := range qs {
		m[q.TP] = to(q)
	}
	return m
}

// perBroker sends each broker its request (built by build from that
// broker's queries) concurrently, and reads every partition's answer (read
// calls answer for each). A transport failure, an error code, or a
// partition missing from the answer fails that query, with what and where;
// every query gets an answer.
func perBroker(ctx context.Context, cl *kgo.Client, byBroker map[int32][]Query, what string,
	build func([]Query) kmsg.Request, read func(kmsg.Response, []Query, func(wire.TopicPartition, Answer, int16)),
) map[wire.TopicPartition]Answer {
	type result struct {
		broker int32
		resp   kmsg.Response
		err    error
	}
	results := make(chan result, len(byBroker))
	for broker, qs := range byBroker {
		req := build(qs)
		go func() {
			resp, err := cl.Broker(int(broker)).Request(ctx, req)
			results <- result{broker: broker, resp: resp, err: err}
		}()
	}
	out := map[wire.TopicPartition]Answer{}
	for range byBroker {
		r := <-results
		if r.err != nil {
			for _, q := range byBroker[r.broker] {
				out[q.TP] = Answer{Err: fmt.Errorf("%s to broker %d: %w", what, r.broker, r.err)}
			}
			continue
		}
		read(r.resp, byBroker[r.broker], func(tp wire.TopicPartition, a Answer, code int16) {
			if err := kerr.ErrorForCode(code); err != nil {
				a.Err = fmt.Errorf("%s for %s on broker %d: %w", what, tp, r.broker, err)
			}
			out[tp] = a
		})
		for _, q := range byBroker[r.broker] {
			if _, ok := out[q.TP]; !ok {
				out[q.TP] = Answer{Err: fmt.Errorf("%s to broker %d: %s missing from the answer", what, r.broker, q.TP)}
			}
		}
	}
	return out
}
