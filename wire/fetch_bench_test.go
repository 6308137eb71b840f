package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"testing"

	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchResponseBody is an encoded Fetch v16 response body (what follows
// the size and the response header) answering n partitions of topic "a"
// with per bytes of 1 KiB records each, in batches of about 1 MiB, as the
// catch-up benches' leaders hold them; and the fetches it answers.
func fetchResponseBody(tb testing.TB, n, per int) ([]byte, map[TopicPartition]FetchPartition) {
	tb.Helper()
	val := bytes.Repeat([]byte{'x'}, 1<<10)
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(16)
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic, rt.TopicID = "a", idA
	sent := map[TopicPartition]FetchPartition{}
	for p := range int32(n) {
		var recs []byte
		for off := int64(0); len(recs) < per; off += 1000 {
			recs = append(recs, batch.Build(batch.Spec{BaseOffset: off, Epoch: 1, Records: 1000, Value: val})...)
		}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = p, 1<<40, 1<<40, 0
		rp.RecordBatches = recs
		rt.Partitions = append(rt.Partitions, rp)
		sent[TopicPartition{"a", p}] = FetchPartition{Offset: 0, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1, LogStartOffset: -1}
	}
	resp.Topics = append(resp.Topics, rt)
	return resp.AppendTo(nil), sent
}

// BenchmarkFetchResponse reads one broker's Fetch response during a
// catch-up (3 partitions of 8 MiB, the default limits) from a stream, as
// a connection reads it (the size, then the body), decodes it with kmsg
// and frames its batches (FetchReplies). "fresh" reads every response
// into a newly allocated buffer, as franz-go's brokerCxn.readSizeAndBody
// does; "reused" into one buffer kept from the response before: the
// difference is the cost of a fresh, zeroed buffer per response (the
// allocation, its zeroing, the page faults of new heap and GC), which a
// connection that pools its read buffers would not pay. B/op shows the
// allocation per response.
func BenchmarkFetchResponse(b *testing.B) {
	body, sent := fetchResponseBody(b, 3, 8<<20)
	ids := map[string]TopicID{"a": idA}
	stream := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	stream = append(stream, body...)
	for _, mode := range []string{"fresh", "reused"} {
		b.Run(mode, func(b *testing.B) {
			var keep []byte
			r := bytes.NewReader(stream)
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				r.Reset(stream)
				var size [4]byte
				if _, err := io.ReadFull(r, size[:]); err != nil {
					b.Fatal(err)
				}
				n := int(binary.BigEndian.Uint32(size[:]))
				buf := keep
				if mode == "fresh" || cap(buf) < n {
					buf = make([]byte, n)
				}
				buf = buf[:n]
				if _, err := io.ReadFull(r, buf); err != nil {
					b.Fatal(err)
				}
				if mode == "reused" {
					keep = buf
				}
				resp := kmsg.NewPtrFetchResponse()
				resp.SetVersion(16)
				if err := resp.ReadFrom(buf); err != nil {
					b.Fatal(err)
				}
				answers, missing := FetchReplies(resp, sent, ids)
				if len(answers) != len(sent) || len(missing) != 0 {
					b.Fatalf("%d answers, %d missing", len(answers), len(missing))
				}
				for tp, a := range answers {
					if a.Batches.Err != nil || a.Batches.Whole < 8<<20 {
						b.Fatal(fmt.Errorf("%s: %d bytes framed: %v", tp, a.Batches.Whole, a.Batches.Err))
					}
				}
			}
		})
	}
}
