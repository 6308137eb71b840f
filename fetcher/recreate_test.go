package fetcher

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A followed topic deleted and created again under the same name is another
// topic: its partitions stop with a clear error and keep what they hold,
// instead of reporting the new topic's offsets as loss of the old one.
func TestRecreatedTopicStops(t *testing.T) {
	c := newKfake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "re"))
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(n int) {
		t.Helper()
		// A new producer each time: a client keeps the old topic id.
		p, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("re"))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for range n {
			if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(10)
	rec := &recorder{}
	m, err := New(Config{
		Client: cl, DataDir: t.TempDir(), Follow: func(topic string) bool { return topic == "re" },
		MetadataInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		Observers: []Observer{rec},
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(rctx) }()
	defer func() {
		cancel()
		<-done
	}()
	status := func() Status {
		ss := m.Statuses()
		if len(ss) != 1 {
			return Status{}
		}
		return ss[0]
	}
	waitFor(t, "10 records copied", func() bool { return status().LogEndOffset == 10 })

	adm := kadm.NewClient(cl)
	if _, err := adm.DeleteTopic(ctx, "re"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the topic to be created again", func() bool {
		r, err := adm.CreateTopic(ctx, 1, 1, nil, "re")
		return err == nil && r.Err == nil
	})
	produce(3)
	waitFor(t, "the partition to stop", func() bool {
		s := status()
		return s.State == "failed" && strings.Contains(s.Error, "recreated")
	})
	cancel()
	<-done
	done <- nil
	if s := status(); s.LogEndOffset != 10 {
		t.Fatalf("the stopped partition should still show the 10 records it holds: %+v", s)
	}
	for _, e := range rec.Events() {
		if _, ok := e.(*follower.TruncationEvent); ok {
			t.Fatalf("a recreated topic was reported as loss: %v", e)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: timed out", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
