package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// wantRecord is what a consumer must see at one offset.
type wantRecord struct {
	key, value string
	nullKey    bool
	ts         int64
}

// buildLog appends count batches of per records from base to l, keyed
// "k<base>" in even batches and null in odd ones, and records each one's
// record in want.
func buildLog(t *testing.T, l *storage.Log, want map[int64]wantRecord, base int64, epoch int32, count, per int) int64 {
	t.Helper()
	for i := range count {
		s := batch.Spec{BaseOffset: base, Epoch: epoch, Records: per, Timestamp: 1_700_000_000_000 + base*10}
		if i%2 == 0 {
			s.Key = fmt.Appendf(nil, "k%d", base)
		}
		if err := l.Append(batch.Build(s)); err != nil {
			t.Fatal(err)
		}
		for r := range per {
			o := base + int64(r)
			want[o] = wantRecord{key: string(s.Key), value: fmt.Sprintf("v%d", o), nullKey: s.Key == nil, ts: s.Timestamp + int64(r)}
		}
		base += int64(per)
	}
	return base
}

// consume polls cl until it has n records or an error, checking each
// record against want and that offsets come in order per partition.
func consume(t *testing.T, ctx context.Context, cl *kgo.Client, n int, want map[int32]map[int64]wantRecord, next map[int32]int64) error {
	t.Helper()
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("after %d of %d records: %w", got, n, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			w, ok := want[r.Partition][r.Offset]
			switch {
			case !ok:
				t.Errorf("partition %d: offset %d never written", r.Partition, r.Offset)
			case r.Offset != next[r.Partition]:
				t.Errorf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
			case string(r.Value) != w.value || string(r.Key) != w.key || (r.Key == nil) != w.nullKey || r.Timestamp.UnixMilli() != w.ts:
				t.Errorf("partition %d offset %d: key %q value %q ts %d, want %+v", r.Partition, r.Offset, r.Key, r.Value, r.Timestamp.UnixMilli(), w)
			}
			next[r.Partition] = r.Offset + 1
			got++
		})
	}
	return nil
}

// consumer is a kgo consumer of topic "t"'s partitions from the start,
// with no group, long-polling for minutes and refreshing metadata as soon
// as it asks, and a context for the test's polls.
func consumer(t *testing.T, addr string, partitions ...int32) (*kgo.Client, context.Context) {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for _, p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": offsets}),
		kgo.FetchMaxWait(5*time.Minute), kgo.RequestTimeoutOverhead(10*time.Minute), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return cl, ctx
}

// A franz-go consumer reads every record of two partitions through the
// server, byte-equal and in order, across segments, then new records as
// they become durable, woken by Notify rather than by MaxWait.
func TestKgoConsumer(t *testing.T) {
	cat := newCatalog()
	cat.add("t", 1, 2)
	want := map[int32]map[int64]wantRecord{0: {}, 1: {}}
	l0 := openLog(t, "t", 0, false)
	l1 := openLog(t, "t", 1, false)
	end0 := buildLog(t, l0, want[0], 0, 0, 60, 3)
	end0 = buildLog(t, l0, want[0], end0, 2, 60, 3)
	end1 := buildLog(t, l1, want[1], 0, 1, 40, 1)
	if len(l0.Segments()) < 3 {
		t.Fatalf("t-0 has %d segments; the test wants several", len(l0.Segments()))
	}
	cat.serve("t", 0, l0, 2)
	cat.serve("t", 1, l1, 1)
	s, addr := testServer(t, cat)

	cl, ctx := consumer(t, addr, 0, 1)
	next := map[int32]int64{}
	if err := consume(t, ctx, cl, int(end0+end1), want, next); err != nil {
		t.Fatal(err)
	}

	// The consumer now long-polls (MaxWait an hour): an append answers it
	// only through Notify.
	waitFor(t, func() bool { return s.waiting() == 1 })
	more := buildLog(t, l0, want[0], end0, 2, 2, 2)
	s.Notify("t", 0)
	if err := consume(t, ctx, cl, int(more-end0), want, next); err != nil {
		t.Fatal(err)
	}
	if next[0] != more || next[1] != end1 {
		t.Errorf("consumed to %v, want t-0 %d, t-1 %d", next, more, end1)
	}
}

// KIP-320 through the server: the copy truncates records a consumer
// already read and serves a new epoch; the consumer is fenced, asks
// OffsetForLeaderEpoch, and reports exactly the records lost.
func TestKgoDetectsTruncation(t *testing.T) {
	cat := newCatalog()
	cat.add("t", 1, 1)
	want := map[int32]map[int64]wantRecord{0: {}}
	l := openLog(t, "t", 0, false)
	end := buildLog(t, l, want[0], 0, 0, 5, 2)  // 0-9 in epoch 0
	end = buildLog(t, l, want[0], end, 2, 5, 2) // 10-19 in epoch 2
	cat.serve("t", 0, l, 2)
	s, addr := testServer(t, cat)
	cl, ctx := consumer(t, addr, 0)
	next := map[int32]int64{}
	if err := consume(t, ctx, cl, int(end), want, next); err != nil {
		t.Fatal(err)
	}
	// Upstream lost 14-19: the copy truncates to 14, appends epoch 4's
	// 14-15, and serves epoch 4.
	waitFor(t, func() bool { return s.waiting() == 1 })
	if err := l.TruncateTo(14); err != nil {
		t.Fatal(err)
	}
	buildLog(t, l, want[0], 14, 4, 1, 2)
	cat.serve("t", 0, l, 4)
	s.Notify("t", 0)
	err := consume(t, ctx, cl, 1, want, next)
	var loss *kgo.ErrDataLoss
	if !errors.As(err, &loss) {
		t.Fatalf("consuming after the truncation: %v, want *kgo.ErrDataLoss", err)
	}
	if loss.ConsumedTo != 20 || loss.ResetTo != 14 {
		t.Errorf("data loss: consumed to %d, reset to %d; want 20 and 14", loss.ConsumedTo, loss.ResetTo)
	}
}

// kadm's offsets and metadata, and a producer refused with the
// authorization errors, the log untouched.
func TestKadmAndProducer(t *testing.T) {
	cat := newCatalog()
	cat.add("t", 1, 1)
	l := openLog(t, "t", 0, true)
	want := map[int64]wantRecord{}
	end := buildLog(t, l, want, 0, 3, 4, 5) // 0-19, durable
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	buildLog(t, l, want, end, 3, 1, 5) // 20-24, not durable
	cat.serve("t", 0, l, 5)
	_, addr := testServer(t, cat)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	md, err := adm.Metadata(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	td := md.Topics["t"]
	if td.Err != nil || td.ID != kadm.TopicID(cat.id("t")) || len(td.Partitions) != 1 || md.Cluster != "kfollower-test" {
		t.Fatalf("metadata: %+v cluster %q", td, md.Cluster)
	}
	if p := td.Partitions[0]; p.Leader != 7 || p.LeaderEpoch != 5 {
		t.Errorf("partition: leader %d epoch %d", p.Leader, p.LeaderEpoch)
	}

	check := func(name string, offs kadm.ListedOffsets, err error, offset int64, epoch int32, ts int64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		o, ok := offs.Lookup("t", 0)
		if !ok || o.Err != nil || o.Offset != offset || o.LeaderEpoch != epoch || o.Timestamp != ts {
			t.Errorf("%s: %+v, want offset %d epoch %d timestamp %d", name, o, offset, epoch, ts)
		}
	}
	offs, err := adm.ListStartOffsets(ctx, "t")
	check("start", offs, err, 0, 3, -1)
	offs, err = adm.ListEndOffsets(ctx, "t")
	check("end (the high watermark)", offs, err, 20, 5, -1)
	offs, err = adm.ListOffsetsAfterMilli(ctx, want[7].ts, "t")
	check("after a timestamp", offs, err, 7, 3, want[7].ts)
	// The largest timestamp is in 20-24, past the high watermark: none,
	// as Kafka answers.
	offs, err = adm.ListMaxTimestampOffsets(ctx, "t")
	check("max timestamp", offs, err, -1, -1, -1)

	for _, tc := range []struct {
		name string
		opts []kgo.Opt
		want error
	}{
		{"idempotent (the default)", nil, kerr.ClusterAuthorizationFailed},
		{"not idempotent", []kgo.Opt{kgo.DisableIdempotentWrite()}, kerr.TopicAuthorizationFailed},
		{"transactional", []kgo.Opt{kgo.TransactionalID("tx")}, kerr.TransactionalIDAuthorizationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"), kgo.RecordRetries(0)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if tc.want == kerr.TransactionalIDAuthorizationFailed {
				err = p.BeginTransaction() // InitProducerId comes first
			}
			if err == nil {
				err = p.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr()
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("produce: %v, want %v", err, tc.want)
			}
		})
	}
	if l.LogEndOffset() != 25 || l.DurableEnd() != 20 {
		t.Errorf("log end %d, durable end %d after refused writes; want 25 and 20", l.LogEndOffset(), l.DurableEnd())
	}
}

// All four codecs: kgo decompresses what the server hands over unchanged,
// and, with kgo's decompressor as Config.Decompress (the wiring's few
// lines), ListOffsets finds the exact record inside each compressed batch.
func TestKgoCodecs(t *testing.T) {
	cat := newCatalog()
	cat.add("t", 1, 1)
	l := openLog(t, "t", 0, false)
	want := map[int32]map[int64]wantRecord{0: {}}
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	for i, codec := range codecs {
		base := int64(i * 10)
		s := batch.Spec{BaseOffset: base, Epoch: 1, Records: 10, Timestamp: 1_700_000_000_000 + base*100, Key: []byte("k"), Value: []byte("same value, compressible, same value, compressible")}
		raw := batch.Build(s)
		if i > 0 {
			comp, err := kgo.DefaultCompressor(codec)
			if err != nil {
				t.Fatal(err)
			}
			recs, typ := comp.Compress(new(bytes.Buffer), raw[batch.HeaderSize:])
			if int(typ) != i {
				t.Fatalf("codec %d compressed as %d", i, typ)
			}
			raw = append(slices.Clone(raw[:batch.HeaderSize]), recs...)
			binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-batch.LogOverhead))
			raw = withCodec(raw, batch.Compression(typ))
		}
		if err := l.Append(raw); err != nil {
			t.Fatal(err)
		}
		for r := range int64(10) {
			want[0][base+r] = wantRecord{key: "k", value: string(s.Value), ts: s.Timestamp + r}
		}
	}
	cat.serve("t", 0, l, 1)
	dec := kgo.DefaultDecompressor()
	_, addr := testServer(t, cat, func(c *Config) {
		c.Decompress = func(codec batch.Compression, data []byte) ([]byte, error) {
			return dec.Decompress(data, kgo.CompressionCodecType(codec))
		}
	})
	cl, ctx := consumer(t, addr, 0)
	if err := consume(t, ctx, cl, len(want[0]), want, map[int32]int64{}); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	for i := range codecs {
		o := int64(i*10 + 7)
		offs, err := adm.ListOffsetsAfterMilli(ctx, want[0][o].ts, "t")
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := offs.Lookup("t", 0); got.Offset != o || got.Timestamp != want[0][o].ts {
			t.Errorf("codec %d: by timestamp %d: offset %d (timestamp %d), want %d", i, want[0][o].ts, got.Offset, got.Timestamp, o)
		}
	}
	offs, err := adm.ListMaxTimestampOffsets(ctx, "t")
	if got, _ := offs.Lookup("t", 0); err != nil || got.Offset != 49 {
		t.Errorf("max timestamp: %+v %v, want offset 49 (in the zstd batch)", got, err)
	}
}
