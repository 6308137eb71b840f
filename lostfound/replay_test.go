package lostfound

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// lostTwice lays out, through storage as the daemon does, what a partition
// that lost data twice at overlapping offsets leaves in lost+found: first
// [100..149] of epoch 0 (saved twice, as after a crash between the save and
// the truncation), then, after the new leader of epoch 2 wrote 100..149
// again, [120..149] of epoch 2. Keys say the epoch; values the offset.
func lostTwice(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	l, err := storage.Open(dir, "t", 0, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendRun := func(base int64, epoch int32, n int) {
		t.Helper()
		var raw []byte
		for off := base; off < base+int64(n); off += 10 {
			raw = append(raw, batch.Build(batch.Spec{BaseOffset: off, Epoch: epoch, Records: 10, Key: fmt.Appendf(nil, "e%d", epoch)})...)
		}
		if err := l.Append(raw); err != nil {
			t.Fatal(err)
		}
	}
	save := func(from int64) {
		t.Helper()
		if lost, err := l.SaveLost(from); err != nil || lost.Batches == 0 {
			t.Fatalf("saving from %d: %+v, %v", from, lost, err)
		}
	}
	appendRun(100, 0, 50)
	save(100)
	save(100) // the same range again: the same records
	if err := l.TruncateTo(100); err != nil {
		t.Fatal(err)
	}
	appendRun(100, 2, 50)
	save(120)
	if err := l.TruncateTo(120); err != nil {
		t.Fatal(err)
	}
	return dir
}

// consumeAll reads every record of topic's partition 0.
func consumeAll(ctx context.Context, t *testing.T, c *kfake.Cluster, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	end, err := endOffset(ctx, cl, topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []*kgo.Record
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for int64(len(out)) < end {
		fs := cl.PollFetches(pctx)
		if err := pctx.Err(); err != nil {
			t.Fatalf("reading %s: %d of %d records: %v", topic, len(out), end, err)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func endOffset(ctx context.Context, cl *kgo.Client, topic string) (int64, error) {
	req := kmsgListEnd(topic)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	return resp.Topics[0].Partitions[0].Offset, nil
}

// sources are the SourceHeader values of rs, in order, and the keys and
// values each carries as "<key>=<value>".
func sources(t *testing.T, rs []*kgo.Record) (srcs, content []string) {
	t.Helper()
	for _, r := range rs {
		var n int
		for _, h := range r.Headers {
			if h.Key == SourceHeader {
				srcs = append(srcs, string(h.Value))
				n++
			}
		}
		if n != 1 {
			t.Fatalf("record at %d carries %d source headers: %v", r.Offset, n, r.Headers)
		}
		content = append(content, fmt.Sprintf("%s=%s", r.Key, r.Value))
	}
	return srcs, content
}

func newReplayCluster(t *testing.T) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "restored"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, cl
}

// Two losses at overlapping offsets, [100..149] in epoch 0 and
// [120..149] in epoch 2, are different records at 120..149: a replay
// restores both, each once (the range saved twice is replayed once), and a
// rerun replays nothing. An identity of offset alone took the second
// loss's 30 records for replayed already.
func TestReplayLossesAtReusedOffsets(t *testing.T) {
	ctx := context.Background()
	dataDir := lostTwice(t)
	list, err := List(ListOptions{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Events) != 3 {
		t.Fatalf("lost+found events %+v, want 3", list.Events)
	}
	c, cl := newReplayCluster(t)

	rep, err := Replay(ctx, ReplayOptions{Client: cl, DataDir: dataDir, ToTopic: "restored"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replayed != 80 || rep.AlreadyPresent != 50 {
		t.Fatalf("replay: %d replayed, %d already present; want 80 (50 of epoch 0, 30 of epoch 2) and 50 (the range saved twice)",
			rep.Replayed, rep.AlreadyPresent)
	}
	var want, wantContent []string
	for off := 100; off < 150; off++ {
		want = append(want, fmt.Sprintf("t/0/0/%d", off))
		wantContent = append(wantContent, fmt.Sprintf("e0=v%d", off))
	}
	for off := 120; off < 150; off++ {
		want = append(want, fmt.Sprintf("t/0/2/%d", off))
		wantContent = append(wantContent, fmt.Sprintf("e2=v%d", off))
	}
	got, content := sources(t, consumeAll(ctx, t, c, "restored"))
	if !slices.Equal(got, want) || !slices.Equal(content, wantContent) {
		t.Fatalf("restored holds\n%v\n%v\nwant\n%v\n%v", got, content, want, wantContent)
	}

	again, err := Replay(ctx, ReplayOptions{Client: cl, DataDir: dataDir, ToTopic: "restored"})
	if err != nil {
		t.Fatal(err)
	}
	if again.Replayed != 0 || again.AlreadyPresent != 130 {
		t.Fatalf("rerun: %d replayed, %d already present; want 0 and 130", again.Replayed, again.AlreadyPresent)
	}
}

// Markers an older replay wrote, "<topic>/<partition>/<offset>" without
// the epoch, still count as present for the records they were made from:
// that replay restored the first loss and took the second for replayed. A
// replay now adds the second loss's 30 records alone, and a rerun nothing.
func TestReplayRecognisesMarkersWithoutEpoch(t *testing.T) {
	ctx := context.Background()
	dataDir := lostTwice(t)
	c, cl := newReplayCluster(t)
	// What the older replay produced: the epoch-0 records, marked by
	// offset alone.
	var old []*kgo.Record
	for off := int64(100); off < 150; off++ {
		old = append(old, &kgo.Record{Topic: "restored", Key: []byte("e0"), Value: fmt.Appendf(nil, "v%d", off),
			Headers: []kgo.RecordHeader{{Key: SourceHeader, Value: fmt.Appendf(nil, "t/0/%d", off)}}})
	}
	if err := cl.ProduceSync(ctx, old...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	rep, err := Replay(ctx, ReplayOptions{Client: cl, DataDir: dataDir, ToTopic: "restored"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replayed != 30 || rep.AlreadyPresent != 100 {
		t.Fatalf("replay over old markers: %d replayed, %d already present; want 30 (epoch 2) and 100", rep.Replayed, rep.AlreadyPresent)
	}
	got, content := sources(t, consumeAll(ctx, t, c, "restored"))
	if len(got) != 80 {
		t.Fatalf("restored holds %d records, want 80", len(got))
	}
	for i, off := 0, 120; off < 150; i, off = i+1, off+1 {
		if g, w := got[50+i], fmt.Sprintf("t/0/2/%d", off); g != w || content[50+i] != fmt.Sprintf("e2=v%d", off) {
			t.Fatalf("record %d: %s %s, want %s e2=v%d", 50+i, g, content[50+i], w, off)
		}
	}
	again, err := Replay(ctx, ReplayOptions{Client: cl, DataDir: dataDir, ToTopic: "restored"})
	if err != nil {
		t.Fatal(err)
	}
	if again.Replayed != 0 {
		t.Fatalf("rerun replayed %d, want 0", again.Replayed)
	}
}

// SourceHeader values parse in both forms and render back unchanged.
func TestParseSource(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want Source
		ok   bool
	}{
		{"orders/3/7/120", Source{Topic: "orders", Partition: 3, Epoch: 7, Offset: 120}, true},
		{"orders/3/120", Source{Topic: "orders", Partition: 3, Epoch: -1, Offset: 120, Legacy: true}, true},
		{"a.b_c-d/0/0/0", Source{Topic: "a.b_c-d", Partition: 0, Epoch: 0, Offset: 0}, true},
		{"orders/x/1", Source{}, false},
		{"orders/1/x/1", Source{}, false},
		{"orders/1", Source{}, false},
		{"/1/2/3", Source{}, false},
		{"orders/1/2/3/4", Source{}, false},
	} {
		got, ok := ParseSource(tc.v)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParseSource(%q) = %+v, %v; want %+v, %v", tc.v, got, ok, tc.want, tc.ok)
		}
		if ok && got.String() != tc.v {
			t.Errorf("%+v renders %q, want %q", got, got.String(), tc.v)
		}
	}
}

// kmsgListEnd asks for the end offset of topic's partition 0.
func kmsgListEnd(topic string) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1 // latest
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// A target whose leader does not yet know the topic (just created: the
// broker that answered Metadata applied it first) answers
// NOT_LEADER_FOR_PARTITION for a while: the replay waits for it, with
// fresh metadata, instead of failing at once.
func TestReplayWaitsForTargetLeader(t *testing.T) {
	ctx := context.Background()
	dataDir := lostTwice(t)
	c, cl := newReplayCluster(t)
	refused := 0
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if refused == 2 {
			return nil, nil, false
		}
		c.KeepControl()
		refused++
		r := req.(*kmsg.ListOffsetsRequest)
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	rep, err := Replay(ctx, ReplayOptions{Client: cl, DataDir: dataDir, ToTopic: "restored", DryRun: true})
	if err != nil {
		t.Fatalf("replay while the leader refuses twice: %v", err)
	}
	if refused != 2 || rep.Replayed != 80 {
		t.Fatalf("%d refusals, %d to replay; want 2 and 80", refused, rep.Replayed)
	}
}
