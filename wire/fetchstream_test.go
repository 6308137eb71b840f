package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"testing"
	"testing/iotest"

	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// streamFrame is a Fetch response frame (correlation id, empty header
// tags, body) at version v with two topics of two partitions each: whole
// batches, a partial tail, aborted transactions, an empty and a null
// records field, and tagged fields after the records (a diverging epoch,
// a current leader), as a broker can send them. want maps each
// partition's name to its whole batches.
func streamFrame(v int16) (frame []byte, want map[string][]byte) {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(v)
	resp.SessionID = 7
	want = map[string][]byte{}
	for ti := range 2 {
		rt := kmsg.NewFetchResponseTopic()
		rt.TopicID = [16]byte{byte(ti + 1), 9}
		for p := range int32(2) {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 100, 90, 0
			key := fmt.Sprintf("%d/%d", ti, p)
			switch {
			case ti == 0 && p == 0:
				whole := batch.BuildRun(10, 3, 4, 5)
				rp.RecordBatches = append(append([]byte(nil), whole...), batch.Build(batch.Spec{BaseOffset: 30, Epoch: 3, Records: 2})[:40]...)
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = 5, 12
				rp.AbortedTransactions = append(rp.AbortedTransactions, at, at)
				want[key] = whole
			case ti == 0 && p == 1:
				rp.RecordBatches = []byte{} // empty
				rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = 2, 8
			case ti == 1 && p == 0:
				rp.RecordBatches = nil // null
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = 2, 4
			default:
				whole := batch.BuildRun(0, 1, 3, 200)
				rp.RecordBatches = whole
				rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = 1, 3 // tagged, after the records
				want[key] = whole
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	frame = binary.BigEndian.AppendUint32(nil, 42)
	frame = append(frame, 0) // the flexible header's tagged fields: none
	return resp.AppendTo(frame), want
}

// streamSeen is what a RecordsSink was shown, per partition.
type streamSeen struct {
	t     *testing.T
	last  map[string][]byte
	calls map[string]int
}

func (s *streamSeen) sink(topic TopicID, partition int32, records []byte, first bool) {
	key := fmt.Sprintf("%d/%d", topic[0]-1, partition)
	prev, seen := s.last[key]
	switch {
	case first == seen:
		s.t.Errorf("%s: shown with first %v, shown before %v", key, first, seen)
	case len(records) <= len(prev) || !bytes.HasPrefix(records, prev):
		s.t.Errorf("%s: shown %d bytes after %d, not grown from them", key, len(records), len(prev))
	}
	for sc := batch.NewScanner(records); ; {
		if !sc.Next() {
			if sc.Err() != nil || sc.Tail() != 0 {
				s.t.Errorf("%s: shown bytes that are not whole batches: %v, tail %d", key, sc.Err(), sc.Tail())
			}
			break
		}
	}
	s.last[key] = append([]byte(nil), records...)
	s.calls[key]++
}

// TestReadStreaming reads responses as any read may split them, from one
// byte at a time up: the sink sees each partition's whole batches, grown
// read by read, and the frame is read whole.
func TestReadStreaming(t *testing.T) {
	for _, v := range []int16{13, 16, 17, 18} {
		frame, want := streamFrame(v)
		for name, wrap := range map[string]func(io.Reader) io.Reader{
			"one byte a read": iotest.OneByteReader,
			"half reads":      iotest.HalfReader,
			"whole":           func(r io.Reader) io.Reader { return r },
		} {
			t.Run(fmt.Sprintf("v%d %s", v, name), func(t *testing.T) {
				seen := &streamSeen{t: t, last: map[string][]byte{}, calls: map[string]int{}}
				got := make([]byte, len(frame))
				if err := readStreaming(wrap(bytes.NewReader(frame)), got, 42, seen.sink); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, frame) {
					t.Fatal("the frame read is not the one sent")
				}
				if len(seen.last) != len(want) {
					t.Fatalf("shown %d partitions, want %d", len(seen.last), len(want))
				}
				for k, w := range want {
					if !bytes.Equal(seen.last[k], w) {
						t.Errorf("%s: shown %d bytes at last, want its %d of whole batches", k, len(seen.last[k]), len(w))
					}
				}
				if name == "one byte a read" && seen.calls["0/0"] != 4 {
					t.Errorf("0/0 shown %d times read a byte at a time, want once per batch (4)", seen.calls["0/0"])
				}
			})
		}
	}
}

// TestReadStreamingShort: a frame cut short fails as io.ReadFull would,
// and bytes that do not fit the schema end the walk without failing the
// read (the decoding of the response says what is wrong).
func TestReadStreamingShort(t *testing.T) {
	frame, _ := streamFrame(16)
	seen := &streamSeen{t: t, last: map[string][]byte{}, calls: map[string]int{}}
	got := make([]byte, len(frame))
	if err := readStreaming(bytes.NewReader(frame[:len(frame)/2]), got, 42, seen.sink); err != io.ErrUnexpectedEOF {
		t.Fatalf("a short frame: %v, want io.ErrUnexpectedEOF", err)
	}
	seen.last = map[string][]byte{}
	bad := append([]byte(nil), frame...)
	bad[4+1+4+2+4] = 0xff // the topic count: a uvarint longer than the frame
	if err := readStreaming(bytes.NewReader(bad), got, 42, seen.sink); err != nil {
		t.Fatalf("a response that does not fit the schema: %v, want it read", err)
	}
	if len(seen.last) != 0 {
		t.Fatalf("a response that does not fit the schema showed %d partitions", len(seen.last))
	}
	// Another request's response: read, and nothing of it shown.
	if err := readStreaming(bytes.NewReader(frame), got, 43, seen.sink); err != nil {
		t.Fatalf("another request's response: %v, want it read (the caller checks the id)", err)
	}
	if len(seen.last) != 0 {
		t.Fatalf("another request's response showed %d partitions", len(seen.last))
	}
}

// TestFetchStreaming: through a FetchConn the sink is shown, at the end,
// exactly the whole batches the decoded response holds, pointing into its
// buffer.
func TestFetchStreaming(t *testing.T) {
	c, _, id := fetchCluster(t, 500)
	ctx := context.Background()
	fc, err := DialFetchConn(ctx, c.ListenAddrs()[0], FetchConnConfig{ClientID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	for _, off := range []int64{0, 250} {
		var last []byte
		shown := 0
		resp, buf, err := fc.FetchStreaming(ctx, fetchFrom(id, off, 100), func(topic TopicID, p int32, records []byte, first bool) {
			if topic != id || p != 0 || first != (shown == 0) {
				t.Errorf("shown %x/%d first %v after %d showings", topic, p, first, shown)
			}
			last, shown = records, shown+1
		})
		if err != nil {
			t.Fatal(err)
		}
		got := recordsOf(t, resp)
		whole := 0
		for sc := batch.NewScanner(got); sc.Next(); {
			whole += sc.Header().Size()
		}
		if whole == 0 || len(last) != whole || &last[0] != &got[0] {
			t.Fatalf("offset %d: shown %d bytes, the response holds %d of whole batches (same bytes: %v)", off, len(last), whole, len(last) > 0 && &last[0] == &got[0])
		}
		buf.Release()
	}
}
