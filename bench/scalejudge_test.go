package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newLeader is who should lead a partition after a move, at which epoch.
type newLeader struct {
	leader, epoch int32
}

// takeover is what the judge saw: for each partition, when its new leader
// first answered at the new epoch (ok) and when the last probe that found
// it not yet leading was sent; the leader took over between the two.
type takeover struct {
	okAt, notYetAt []time.Duration // by partition, since the move began
	requests       map[int32]int   // probes sent, by broker
	answers        map[string]int  // partition answers, by result
}

// last is when the last partition's new leader was first seen leading,
// and when it was last seen not yet leading: the cluster finished moving
// in between.
func (t takeover) last() (ok, notYet time.Duration) {
	return slices.Max(t.okAt), slices.Max(t.notYetAt)
}

func (t takeover) String() string {
	ok, notYet := t.last()
	var rs, as []string
	for id, n := range t.requests {
		rs = append(rs, fmt.Sprintf("%d=%d", id, n))
	}
	for k, v := range t.answers {
		as = append(as, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(rs)
	sort.Strings(as)
	// How the take-over spread over time: a broker applies a leader
	// change partition by partition (ReplicaManager.applyDelta).
	sorted := slices.Sorted(slices.Values(t.okAt))
	q := func(f float64) time.Duration { return sorted[int(f*float64(len(sorted)-1))].Round(time.Millisecond) }
	return fmt.Sprintf("new leaders answering at their new epoch: the first by %v, half by %v, 90%% by %v, all by %v (the last one still did not at %v); probes per broker [%s], answers %s",
		q(0), q(0.5), q(0.9), ok.Round(time.Millisecond), notYet.Round(time.Millisecond), strings.Join(rs, " "), strings.Join(as, " "))
}

// judgeTakeover is an outside judge of when the cluster has finished
// moving its leaders, independent of kfollower: a client of its own that
// asks each new leader, one OffsetForLeaderEpoch request per broker at a
// time and every interval, about all its partitions not yet taken over,
// with the new epoch as CurrentLeaderEpoch, as a consumer (replica id -1,
// so only the leader may answer). A broker answers UNKNOWN_LEADER_EPOCH
// while its own epoch is older (it has not yet applied the change),
// NOT_LEADER_OR_FOLLOWER while it does not lead, and ok once it leads at
// that epoch (Partition.lastOffsetForLeaderEpoch and
// localLogWithEpochOrThrow in Kafka): the same answers kfollower's
// reconciliation waits out. FENCED_LEADER_EPOCH (the broker is at a later
// epoch than predicted) ends it with an error, as the prediction was
// wrong. It returns once every partition answered ok, or at ctx's end.
func judgeTakeover(ctx context.Context, cl *kgo.Client, topic string, want []newLeader, since time.Time, interval time.Duration) (takeover, error) {
	t := takeover{
		okAt: make([]time.Duration, len(want)), notYetAt: make([]time.Duration, len(want)),
		requests: map[int32]int{}, answers: map[string]int{},
	}
	byBroker := map[int32][]int32{}
	for p, w := range want {
		byBroker[w.leader] = append(byBroker[w.leader], int32(p))
	}
	var mu sync.Mutex // guards t's maps; each broker's goroutine writes only its partitions' slots
	errs := make(chan error, len(byBroker))
	var wg sync.WaitGroup
	for id, parts := range byBroker {
		wg.Go(func() {
			errs <- judgeBroker(ctx, cl, topic, id, parts, want, since, interval, &t, &mu)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return t, err
		}
	}
	return t, nil
}

func judgeBroker(ctx context.Context, cl *kgo.Client, topic string, id int32, left []int32, want []newLeader,
	since time.Time, interval time.Duration, t *takeover, mu *sync.Mutex) error {
	broker := cl.Broker(int(id))
	for len(left) > 0 {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1 // a consumer: only the leader answers
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		for _, p := range left {
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition = p
			rp.CurrentLeaderEpoch, rp.LeaderEpoch = want[p].epoch, want[p].epoch
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		sent := time.Since(since)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := req.RequestWith(rctx, broker)
		cancel()
		answered := time.Since(since)
		mu.Lock()
		t.requests[id]++
		mu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("probing broker %d for %d partitions of %s: %w", id, len(left), topic, ctx.Err())
			}
			// A transport error: the judge's client reconnects; the
			// partitions stay due.
			mu.Lock()
			t.answers["request-failed"] += len(left)
			mu.Unlock()
		} else {
			answeredOK := map[int32]bool{}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					err := kerr.ErrorForCode(rp.ErrorCode)
					name := "ok"
					if err != nil {
						name = kerr.TypedErrorForCode(rp.ErrorCode).Message
					}
					mu.Lock()
					t.answers[name]++
					mu.Unlock()
					switch {
					case err == nil:
						answeredOK[rp.Partition] = true
						t.okAt[rp.Partition] = answered
					case errors.Is(err, kerr.FencedLeaderEpoch):
						return fmt.Errorf("broker %d leads %s-%d at an epoch past %d, the one predicted", id, topic, rp.Partition, want[rp.Partition].epoch)
					default:
						t.notYetAt[rp.Partition] = sent
					}
				}
			}
			left = slices.DeleteFunc(left, func(p int32) bool { return answeredOK[p] })
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("probing broker %d: %d partitions of %s not yet led at their new epoch: %w", id, len(left), topic, ctx.Err())
		case <-time.After(interval):
		}
	}
	return nil
}
