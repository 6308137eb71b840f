package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestServe runs the kfollower binary with --serve against a real cluster:
// a franz-go consumer reads every record from kfollower byte-equal (offsets,
// keys, values, headers, timestamps, all four codecs, null keys and values)
// to what it reads from the cluster; a produce attempt fails with
// TOPIC_AUTHORIZATION_FAILED and leaves the data dir unchanged; /status
// names the endpoint under a cluster id of kfollower's own; a busy --serve
// port is exit 1 before anything is written.
func TestServe(t *testing.T) {
	ctx := context.Background()
	bin := binary(t)
	c := kafka.Start(t, kafka.Options{})
	const topic = "served"
	c.CreateTopic(ctx, topic, [][]int32{{1, 2, 3}}, nil)
	want := produceMixed(ctx, t, c, topic)

	data := t.TempDir()
	addr := freeAddr(t)
	d := startDaemon(t, bin, nil, "--bootstrap-servers", strings.Join(c.Bootstrap(), ","), "--topics", topic,
		"--data-dir", data, "--serve", addr)
	waitStatus(t, d, topic, 0, fmt.Sprintf("log end %d", len(want)), func(s fetcher.Status) bool { return s.LogEndOffset == int64(len(want)) })

	// /status names the endpoint and a cluster id that is not upstream's.
	var doc struct {
		Serve *serveStatus `json:"serve"`
	}
	_, body, err := d.get("/status")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Serve == nil || doc.Serve.Address != addr || doc.Serve.Advertised != addr || doc.Serve.NodeID != 0 || len(doc.Serve.ClusterID) != 22 {
		t.Fatalf("/status serve = %+v, want address and advertised %s, node 0, a cluster id", doc.Serve, addr)
	}
	kf, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	md, err := kadm.NewClient(kf).BrokerMetadata(ctx)
	if err != nil {
		t.Fatalf("Metadata from kfollower: %v", err)
	}
	upstream, err := c.Admin().BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md.Cluster != doc.Serve.ClusterID || md.Cluster == upstream.Cluster || len(md.Brokers) != 1 || md.Brokers[0].NodeID != 0 {
		t.Fatalf("kfollower's Metadata: cluster %q brokers %+v; want cluster %q (not upstream's %q), broker 0 alone",
			md.Cluster, md.Brokers, doc.Serve.ClusterID, upstream.Cluster)
	}

	t.Run("franz-go consumer", func(t *testing.T) {
		fromCluster := consumeAll(ctx, t, c.Bootstrap(), topic, len(want))
		fromKf := consumeAll(ctx, t, []string{addr}, topic, len(want))
		sameRecords(t, fromKf, fromCluster)
	})

	t.Run("Java console consumer", func(t *testing.T) {
		// Kafka's own consumer, which no one here wrote, in assign mode:
		// with --partition it assigns and seeks, without it it would join
		// a group, which kfollower does not serve yet.
		// The formatter's options are --formatter-property from 4.1 on
		// (KIP-1147, which deprecates --property); 3.9 and 4.0 know only
		// --property.
		prop := "--formatter-property"
		if v := kafka.Version(); strings.HasPrefix(v, "3.") || strings.HasPrefix(v, "4.0.") {
			prop = "--property"
		}
		out, err := kafka.RunTool(kafka.ToolConsoleConsumer,
			"--bootstrap-server", addr, "--topic", topic, "--partition", "0", "--offset", "earliest",
			"--max-messages", fmt.Sprint(len(want)), "--timeout-ms", "60000",
			prop, "print.offset=true", prop, "print.key=true",
			prop, "print.headers=true", prop, "print.timestamp=true")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, line := range strings.Split(out.Stdout, "\n") {
			if strings.HasPrefix(line, "CreateTime:") {
				got = append(got, line)
			}
		}
		fromCluster := consumeAll(ctx, t, c.Bootstrap(), topic, len(want))
		if len(got) != len(fromCluster) {
			t.Fatalf("the console consumer printed %d records, want %d:\n%s", len(got), len(fromCluster), tail(out.Stdout, 20))
		}
		for i, r := range fromCluster {
			if w := consoleLine(r); got[i] != w {
				t.Fatalf("record %d: the console consumer printed\n  %q\nwant (from the cluster)\n  %q", i, got[i], w)
			}
		}
		if !strings.Contains(out.Stdout+out.Stderr, fmt.Sprintf("Processed a total of %d messages", len(want))) {
			t.Errorf("the console consumer did not report %d messages:\n%s", len(want), tail(out.Stderr, 10))
		}
	})

	t.Run("produce refused", func(t *testing.T) {
		before := dirContents(t, data)
		// kgo's default, idempotent producer asks InitProducerId first,
		// which Kafka refuses a principal without IDEMPOTENT_WRITE with
		// CLUSTER_AUTHORIZATION_FAILED; a plain producer reaches Produce.
		for _, tc := range []struct {
			name string
			opts []kgo.Opt
			want error
		}{
			{"idempotent", nil, kerr.ClusterAuthorizationFailed},
			{"not idempotent", []kgo.Opt{kgo.DisableIdempotentWrite()}, kerr.TopicAuthorizationFailed},
		} {
			p, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(0)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err = p.ProduceSync(pctx, &kgo.Record{Partition: 0, Value: []byte("must not land")}).FirstErr()
			cancel()
			p.Close()
			if !errors.Is(err, tc.want) {
				t.Errorf("%s producer: %v, want %v", tc.name, err, tc.want)
			}
		}
		if after := dirContents(t, data); !equalContents(before, after) {
			t.Fatalf("a refused produce changed the data dir:\nbefore %v\nafter  %v", keys(before), keys(after))
		}
	})

	t.Run("busy port", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "data")
		r := runBinary(t, bin, nil, 60*time.Second, "run", "--bootstrap-servers", strings.Join(c.Bootstrap(), ","), "--topics", topic,
			"--data-dir", other, "--http-listen", freeAddr(t), "--serve", addr)
		want := "listening for Kafka clients (--serve) on " + addr
		if r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "address already in use") {
			t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and %q", r.code, r.stderr, want)
		}
		if _, err := os.Stat(other); !os.IsNotExist(err) {
			t.Fatalf("a busy --serve port left the data dir %s behind (%v)", other, err)
		}
	})
}

// produceMixed writes one batch per codec to topic-0, each with headers, a
// record with a null key and one with a null value, and returns the records
// in offset order.
func produceMixed(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string) []*kgo.Record {
	t.Helper()
	var all []*kgo.Record
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	for ci, codec := range codecs {
		cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(codec))
		var rs []*kgo.Record
		for i := range 40 {
			r := &kgo.Record{Partition: 0, Key: fmt.Appendf(nil, "k%d-%d", ci, i), Value: fmt.Appendf(nil, "value %d-%d, compressible, compressible", ci, i),
				Headers: []kgo.RecordHeader{{Key: "codec", Value: fmt.Appendf(nil, "%d", ci)}, {Key: "empty"}}}
			switch i {
			case 3:
				r.Key = nil
			case 5:
				r.Value = nil
			}
			rs = append(rs, r)
		}
		pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		if err := cl.ProduceSync(pctx, rs...).FirstErr(); err != nil {
			cancel()
			cl.Close()
			t.Fatalf("producing to %s-0: %v", topic, err)
		}
		cancel()
		cl.Close()
		all = append(all, rs...)
	}
	return all
}

// consumeAll reads n records of topic-0 from the earliest offset with
// franz-go's assign-mode consumer (no group).
func consumeAll(ctx context.Context, t *testing.T, seeds []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("consuming %s-0 from %v: %d of %d records within 60 s", topic, seeds, len(got), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("consuming %s-%d from %v: %v", topic, p, seeds, err) })
		got = append(got, fs.Records()...)
	}
	return got
}

// sameRecords compares what a consumer read from kfollower with what it read
// from the cluster, field by field.
func sameRecords(t *testing.T, got, want []*kgo.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i, g := range got {
		w := want[i]
		if g.Offset != w.Offset || !bytes.Equal(g.Key, w.Key) || (g.Key == nil) != (w.Key == nil) ||
			!bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) ||
			!g.Timestamp.Equal(w.Timestamp) || g.LeaderEpoch != w.LeaderEpoch || fmt.Sprint(g.Headers) != fmt.Sprint(w.Headers) {
			t.Fatalf("record %d: from kfollower\n  offset %d epoch %d ts %v key %q value %q headers %v\nfrom the cluster\n  offset %d epoch %d ts %v key %q value %q headers %v",
				i, g.Offset, g.LeaderEpoch, g.Timestamp, g.Key, g.Value, g.Headers, w.Offset, w.LeaderEpoch, w.Timestamp, w.Key, w.Value, w.Headers)
		}
	}
}

// consoleLine is how Kafka's DefaultMessageFormatter prints r with
// print.timestamp, print.offset, print.headers and print.key: tab-separated,
// headers as key:value joined by commas, "NO_HEADERS" without any, "null"
// for a null key or value.
func consoleLine(r *kgo.Record) string {
	orNull := func(b []byte) string {
		if b == nil {
			return "null"
		}
		return string(b)
	}
	hs := "NO_HEADERS"
	if len(r.Headers) > 0 {
		var parts []string
		for _, h := range r.Headers {
			parts = append(parts, h.Key+":"+orNull(h.Value))
		}
		hs = strings.Join(parts, ",")
	}
	return fmt.Sprintf("CreateTime:%d\tOffset:%d\t%s\t%s\t%s", r.Timestamp.UnixMilli(), r.Offset, hs, orNull(r.Key), orNull(r.Value))
}

// dirContents maps every file under dir to its bytes.
func dirContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalContents(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s(%d)", filepath.Base(k), len(v)))
	}
	return out
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
