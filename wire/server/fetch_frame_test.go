package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// memSection is a Section over bytes in memory; stale is what Stale says.
type memSection struct {
	b     []byte
	stale bool
}

func (s *memSection) Len() int { return len(s.b) }
func (s *memSection) Send(w io.Writer, from, to int) error {
	_, err := w.Write(s.b[from:to])
	return err
}
func (s *memSection) ReadAt(p []byte, off int64) (int, error) { return copy(p, s.b[off:]), nil }
func (s *memSection) Stale() bool                             { return s.stale }

// randomFetch is a Fetch response of version v with random fields, the
// shapes this server answers (unknown tags aside), and per partition its
// records as sections (nil for some: their RecordBatches stand).
func randomFetch(rng *rand.Rand, v int16) (*kmsg.FetchResponse, [][]Section) {
	r := kmsg.NewPtrFetchResponse()
	r.Version = v
	r.ThrottleMillis = rng.Int32N(1000)
	r.ErrorCode = int16(rng.IntN(3))
	r.SessionID = rng.Int32()
	var recs [][]Section
	for ti := range rng.IntN(4) {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = fmt.Sprintf("topic-%d-%s", ti, string(make([]byte, rng.IntN(200))))
		t.TopicID[0], t.TopicID[15] = byte(ti), byte(rng.IntN(256))
		for pi := range rng.IntN(5) {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = int32(pi)
			p.ErrorCode = int16(rng.IntN(2))
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = rng.Int64(), rng.Int64(), rng.Int64()
			p.PreferredReadReplica = -1
			if rng.IntN(2) == 0 {
				p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
				for range rng.IntN(3) {
					a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					a.ProducerID, a.FirstOffset = rng.Int64(), rng.Int64()
					p.AbortedTransactions = append(p.AbortedTransactions, a)
				}
			}
			if rng.IntN(3) == 0 {
				p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = rng.Int32(), rng.Int64()
			}
			if rng.IntN(3) == 0 {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = rng.Int32(), rng.Int32()
			}
			if rng.IntN(5) == 0 {
				p.SnapshotID.EndOffset, p.SnapshotID.Epoch = rng.Int64(), rng.Int32()
			}
			var secs []Section
			switch rng.IntN(4) {
			case 0:
				p.RecordBatches = nil
			case 1:
				p.RecordBatches = randomBytes(rng, rng.IntN(300))
			case 2:
				p.RecordBatches = []byte{}
			default:
				secs = []Section{}
				for range 1 + rng.IntN(3) {
					secs = append(secs, &memSection{b: randomBytes(rng, 1+rng.IntN(70000))})
				}
			}
			recs = append(recs, secs)
			t.Partitions = append(t.Partitions, p)
		}
		r.Topics = append(r.Topics, t)
	}
	if rng.IntN(2) == 0 {
		b := kmsg.NewFetchResponseBroker()
		b.NodeID, b.Host, b.Port = rng.Int32(), "host.example", rng.Int32()
		if rng.IntN(2) == 0 {
			rack := "rack-a"
			b.Rack = &rack
		}
		r.Brokers = append(r.Brokers, b)
	}
	return r, recs
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// framed is what writeFrame sends of f.
func framed(t testing.TB, f *fetchFrame) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := writeFrame(&out, f); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// checkFetchEncoding compares encodeFetch, sent by writeFrame, with
// appendResponse (kmsg's AppendTo) of the same response with the records
// in memory.
func checkFetchEncoding(t testing.TB, r *kmsg.FetchResponse, recs [][]Section, corr int32) {
	t.Helper()
	var f fetchFrame
	if !encodeFetch(&f, corr, r, recs) {
		t.Fatalf("v%d: encodeFetch refused a response without unknown tags", r.Version)
	}
	got := framed(t, &f)
	if len(got) != f.size {
		t.Fatalf("v%d: sent %d bytes, the frame says %d", r.Version, len(got), f.size)
	}
	materialize(r, recs)
	want := appendResponse(nil, corr, r)
	if !bytes.Equal(got, want) {
		at := 0
		for at < min(len(got), len(want)) && got[at] == want[at] {
			at++
		}
		t.Fatalf("v%d: the encoding differs from kmsg's at byte %d (%d vs %d bytes)", r.Version, at, len(got), len(want))
	}
}

// Every version served encodes as kmsg does, over random responses.
func TestFetchEncodingIsKmsgs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, v := range versions(1) {
		for range 200 {
			r, recs := randomFetch(rng, v)
			checkFetchEncoding(t, r, recs, rng.Int32())
		}
	}
}

func FuzzFetchEncoding(f *testing.F) {
	f.Add(uint64(1), int16(4))
	f.Add(uint64(7), int16(12))
	f.Add(uint64(9), int16(18))
	f.Fuzz(func(t *testing.T, seed uint64, v int16) {
		vs := versions(1)
		v = vs[int(uint16(v))%len(vs)]
		rng := rand.New(rand.NewPCG(seed, seed>>1))
		r, recs := randomFetch(rng, v)
		checkFetchEncoding(t, r, recs, int32(seed))
	})
}

// pauseWriter passes writes through to out until at bytes have gone,
// then tells paused and waits for resume before the rest.
type pauseWriter struct {
	out    bytes.Buffer
	at     int
	paused chan struct{}
	resume chan struct{}
	once   sync.Once
}

func (w *pauseWriter) Write(p []byte) (int, error) {
	if rest := w.at - w.out.Len(); rest >= 0 && rest < len(p) {
		w.out.Write(p[:rest])
		w.once.Do(func() {
			close(w.paused)
			<-w.resume
		})
		w.out.Write(p[rest:])
		return len(p), nil
	}
	return w.out.Write(p)
}

// A truncation between taking a section and the end of its send never
// lets the client have a whole frame: the frame's last byte is held back
// and the answer fails, wherever the send was when the truncation began.
func TestTruncationDuringSend(t *testing.T) {
	first := run(0, 1, 4, 3)
	for _, v := range []int16{11, 18} { // the records last in the frame, and not
		for _, stop := range []int{0, 20, 60, len(first) / 2, len(first) - 1} {
			t.Run(fmt.Sprintf("v%d-at-%d", v, stop), func(t *testing.T) {
				l := openLog(t, "t", 0, false, first)
				sec, next, err := l.ReadSection(0, 1<<20, l.DurableEnd(), true)
				if err != nil || sec == nil || next != 12 {
					t.Fatalf("ReadSection: %v, next %d, %v", sec, next, err)
				}
				r := kmsg.NewPtrFetchResponse()
				r.Version = v
				tp := kmsg.NewFetchResponseTopic()
				tp.Topic = "t"
				p := kmsg.NewFetchResponseTopicPartition()
				tp.Partitions = append(tp.Partitions, p)
				r.Topics = append(r.Topics, tp)
				var f fetchFrame
				if !encodeFetch(&f, 1, r, [][]Section{{sec}}) {
					t.Fatal("encodeFetch refused")
				}
				recStart := f.size - sec.Len()
				if v >= 12 {
					recStart -= 3 // the partition's, the topic's and the body's tags
				}
				w := &pauseWriter{at: recStart + stop, paused: make(chan struct{}), resume: make(chan struct{})}
				done := make(chan error, 1)
				go func() { done <- writeFrame(w, &f) }()
				<-w.paused
				// Truncate and append other batches where the old ones were.
				if err := l.TruncateTo(0); err != nil {
					t.Fatal(err)
				}
				if err := l.Append(run(0, 2, 4, 3)); err != nil {
					t.Fatal(err)
				}
				close(w.resume)
				err = <-done
				got := w.out.Bytes()
				if err == nil && stop == len(first)-1 && v < 12 {
					// Paused before the last byte, which was read and
					// checked before the truncation: the whole frame is
					// the log as it was when the section was taken.
					if len(got) != f.size || !bytes.HasSuffix(got, first) {
						t.Fatalf("a whole frame of %d bytes (of %d) that is not the log's bytes", len(got), f.size)
					}
					return
				}
				if !errors.Is(err, errSectionChanged) {
					t.Fatalf("writeFrame: %v, want %v", err, errSectionChanged)
				}
				if len(got) != f.size-1 {
					t.Fatalf("the client got %d bytes of a %d-byte frame, want all but the last", len(got), f.size)
				}
			})
		}
	}
}

// Without a truncation the frame goes out whole, and holds the log's bytes.
func TestSectionSentWhole(t *testing.T) {
	want := run(0, 1, 4, 3)
	l := openLog(t, "t", 0, false, want)
	sec, _, err := l.ReadSection(0, 1<<20, l.DurableEnd(), true)
	if err != nil {
		t.Fatal(err)
	}
	var f fetchFrame
	r := kmsg.NewPtrFetchResponse()
	r.Version = 11
	tp := kmsg.NewFetchResponseTopic()
	tp.Partitions = append(tp.Partitions, kmsg.NewFetchResponseTopicPartition())
	r.Topics = append(r.Topics, tp)
	encodeFetch(&f, 1, r, [][]Section{{sec}})
	got := framed(t, &f)
	if !bytes.HasSuffix(got, want) {
		t.Fatalf("the frame does not end with the log's %d bytes", len(want))
	}
}
