package kafka_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produce writes n records "<prefix>-<i>" to topic-0 with acks=all on a
// fresh idempotent producer and returns them as acknowledged (offsets set).
func produce(ctx context.Context, t *testing.T, c *kafka.Cluster, topic, prefix string, n int) []*kgo.Record {
	t.Helper()
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond))
	defer cl.Close()
	var acked []*kgo.Record
	for start := 0; start < n; start += 1000 {
		var rs []*kgo.Record
		for i := start; i < min(n, start+1000); i++ {
			rs = append(rs, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "%s-%05d", prefix, i)})
		}
		pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		res := cl.ProduceSync(pctx, rs...)
		cancel()
		if err := res.FirstErr(); err != nil {
			t.Fatalf("producing %s records %d..%d to %s: %v", prefix, start, start+len(rs)-1, topic, err)
		}
		acked = append(acked, rs...)
	}
	return acked
}

// consume reads topic-0 from the start until it has want records and
// fails if it sees more or none arrive within the deadline.
func consume(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string, want int) []*kgo.Record {
	t.Helper()
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s-0: have %d of %d records after %v", topic, len(got), want, ctx.Err())
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetching %s-%d: %v (retrying)", tp, p, err) })
		got = append(got, fs.Records()...)
	}
	if len(got) != want {
		t.Fatalf("reading %s-0: want %d records, got %d", topic, want, len(got))
	}
	return got
}

// checkSame asserts got holds exactly want's values at want's offsets, in order.
func checkSame(t *testing.T, got, want []*kgo.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Offset != want[i].Offset || string(got[i].Value) != string(want[i].Value) {
			t.Fatalf("record %d: got offset %d value %q, want offset %d value %q",
				i, got[i].Offset, got[i].Value, want[i].Offset, want[i].Value)
		}
	}
}

type epochEntry struct {
	epoch int32
	start int64
}

// readEpochCheckpoint parses a broker's leader-epoch-checkpoint (version 0,
// count, then "epoch startOffset" lines; docs/kafka.md §10.3).
func readEpochCheckpoint(t *testing.T, path string) []epochEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("reading the broker's epoch checkpoint: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 2 || lines[0] != "0" {
		t.Fatalf("%s: want version 0 and a count, got %q", path, lines)
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		t.Fatalf("%s: count %q does not match %d entries", path, lines[1], len(lines)-2)
	}
	var es []epochEntry
	for _, l := range lines[2:] {
		var e epochEntry
		if _, err := fmt.Sscanf(l, "%d %d", &e.epoch, &e.start); err != nil {
			t.Fatalf("%s: bad entry %q: %v", path, l, err)
		}
		es = append(es, e)
	}
	return es
}

func checkpointPath(n *kafka.Node, topic string) string {
	return filepath.Join(n.DataDir(), topic+"-0", "leader-epoch-checkpoint")
}

func describe(es []epochEntry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "(%d,%d)", e.epoch, e.start)
	}
	return b.String()
}
