package fetcher

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/storage"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The logs of a Metadata answer's new partitions are opened in parallel,
// at most openParallel at once: the first openParallel opens each wait
// until that many are under way at the same time (a serial open would
// wait out the deadline), no more are ever under way at once, and every
// partition ends up followed from its own log.
func TestOpenLogsInParallel(t *testing.T) {
	e := newDriverEnvAt(t, fastDir(t), slog.New(slog.DiscardHandler))
	defer e.close()
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	var now, most, started int
	var reached bool
	var waitFailed error
	deadline := time.Now().Add(10 * time.Second)
	wake := time.AfterFunc(10*time.Second, cond.Broadcast)
	defer wake.Stop()
	open := e.m.openLog
	e.m.openLog = func(dataDir, topic string, partition int32, opts storage.Options) (partLog, error) {
		mu.Lock()
		now++
		started++
		most = max(most, now)
		reached = reached || now == openParallel
		if started <= openParallel {
			for !reached && time.Now().Before(deadline) {
				cond.Wait()
			}
			if !reached && waitFailed == nil {
				waitFailed = fmt.Errorf("only %d opens under way at once", now)
			}
		}
		cond.Broadcast()
		mu.Unlock()
		l, err := open(dataDir, topic, partition, opts)
		mu.Lock()
		now--
		mu.Unlock()
		return l, err
	}
	const partitions = 200
	resp := kmsg.NewPtrMetadataResponse()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID = 1
	resp.Brokers = append(resp.Brokers, b)
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr("t")
	copy(mt.TopicID[:], "t")
	for p := range int32(partitions) {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p, 1, 1
		mt.Partitions = append(mt.Partitions, mp)
	}
	resp.Topics = append(resp.Topics, mt)
	e.m.placeAll(e.ctx, resp, -1)
	e.settle(t)
	if waitFailed != nil {
		t.Fatalf("the logs were not opened in parallel: %v", waitFailed)
	}
	if most > openParallel {
		t.Fatalf("%d opens under way at once, want at most %d", most, openParallel)
	}
	if n := len(e.m.Statuses()); n != partitions {
		t.Fatalf("%d partitions followed, want %d", n, partitions)
	}
	if started != partitions {
		t.Fatalf("%d logs opened, want one a partition (%d)", started, partitions)
	}
}

// place takes each log as soon as its own open is done: with the last
// partition's open held back, the first partitions are already followed
// (registered for serving) while it waits, and the workers' long polls
// are cut short; once it is let go, every partition is followed from its
// own log.
func TestPlaceTakesEachLogOnceOpen(t *testing.T) {
	e := newDriverEnvAt(t, fastDir(t), slog.New(slog.DiscardHandler))
	defer e.close()
	const partitions = 20
	release := make(chan struct{})
	open := e.m.openLog
	e.m.openLog = func(dataDir, topic string, partition int32, opts storage.Options) (partLog, error) {
		if partition == partitions-1 {
			<-release
		}
		return open(dataDir, topic, partition, opts)
	}
	resp := kmsg.NewPtrMetadataResponse()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID = 1
	resp.Brokers = append(resp.Brokers, b)
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr("t")
	copy(mt.TopicID[:], "t")
	for p := range int32(partitions) {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p, 1, 1
		mt.Partitions = append(mt.Partitions, mp)
	}
	resp.Topics = append(resp.Topics, mt)
	placed := make(chan struct{})
	go func() {
		defer close(placed)
		e.m.placeAll(e.ctx, resp, -1)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, ok := e.m.CatalogPartition("t", partitions-2); ok {
			break
		}
		if time.Now().After(deadline) {
			close(release)
			<-placed
			t.Fatal("partition t-18 was not taken while t-19's open was held back")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-placed:
		t.Fatal("placeAll returned before t-19's log was opened")
	default:
	}
	// Meanwhile the workers' long polls are cut, for what they adopt
	// waits for the Fetch in the air; once placed, they wait MaxWait.
	w := &worker{m: e.m}
	if got, want := w.limits(time.Now()).MaxWaitMillis, int32(minCutWait/time.Millisecond); got != want {
		t.Errorf("while logs are being opened and placed, the long poll waits %d ms, want %d", got, want)
	}
	close(release)
	<-placed
	if got, want := w.limits(time.Now()).MaxWaitMillis, e.m.cfg.Limits.MaxWaitMillis; got != want {
		t.Errorf("once every partition is placed, the long poll waits %d ms, want MaxWait %d", got, want)
	}
	e.settle(t)
	if n := len(e.m.Statuses()); n != partitions {
		t.Fatalf("%d partitions followed, want %d", n, partitions)
	}
}
