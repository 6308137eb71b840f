package storage

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
)

// fetchRun is a 1 MiB fetch-sized run of 64 batches of 16 KiB, with base
// offsets patched per use: the base offset is outside the CRC, so
// restamping it keeps the batches valid.
type fetchRun struct {
	raw     []byte
	offsets []int // position of each batch
	records int64
}

func newFetchRun() *fetchRun {
	r := &fetchRun{}
	val := make([]byte, 16<<10-200)
	for i := range val {
		val[i] = byte(i * 7)
	}
	for range 64 {
		r.offsets = append(r.offsets, len(r.raw))
		r.raw = append(r.raw, batch.Build(batch.Spec{BaseOffset: r.records, Epoch: 1, Records: 1, Value: val})...)
		r.records++
	}
	return r
}

func (r *fetchRun) at(base int64) []byte {
	for i, p := range r.offsets {
		binary.BigEndian.PutUint64(r.raw[p:], uint64(base+int64(i)))
	}
	return r.raw
}

// BenchmarkAppend measures Append of 1 MiB runs against a plain
// sequential write of the same bytes to a file on the same disk
// ("file"); the target is log/file >= 0.8 with FlushOS. Under
// FlushInterval ("log-flush-100ms") a goroutine beside the appends
// Flushes every 100 ms, as fetcher's flusher does.
func BenchmarkAppend(b *testing.B) {
	run := newFetchRun()
	b.Run("file", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "plain"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.SetBytes(int64(len(run.raw)))
		for i := 0; b.Loop(); i++ {
			if _, err := f.Write(run.at(int64(i) * run.records)); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, p := range []struct {
		name string
		pol  FlushPolicy
	}{{"log-flush-os", FlushOS}, {"log-flush-100ms", FlushInterval}, {"log-flush-every", FlushEveryAppend}} {
		b.Run(p.name, func(b *testing.B) {
			l, err := Open(b.TempDir(), "bench", 0, Options{Logger: quiet, Flush: p.pol, FlushInterval: 100 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			if p.pol == FlushInterval {
				// Flush on a goroutine of its own every interval, as
				// fetcher's flusher does, beside the appends.
				stop, done := make(chan struct{}), make(chan struct{})
				defer func() { close(stop); <-done }()
				go func() {
					defer close(done)
					t := time.NewTicker(100 * time.Millisecond)
					defer t.Stop()
					for {
						select {
						case <-stop:
							return
						case <-t.C:
							if err := l.Flush(); err != nil {
								b.Error(err)
								return
							}
						}
					}
				}()
			}
			b.SetBytes(int64(len(run.raw)))
			for i := 0; b.Loop(); i++ {
				if err := l.Append(run.at(int64(i) * run.records)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpen measures Open of a single-segment log of the given size,
// cleanly closed ("tail-0") or with an unflushed tail after its recovery
// point, as after a crash. Open time should follow the tail, not the size.
// KFOLLOWER_BENCH_OPEN_GIB=1 adds the 1 GiB log.
func BenchmarkOpen(b *testing.B) {
	sizes := []int64{64 << 20, 256 << 20}
	if os.Getenv("KFOLLOWER_BENCH_OPEN_GIB") == "1" {
		sizes = append(sizes, 1<<30)
	}
	run := newFetchRun()
	for _, size := range sizes {
		for _, tail := range []int64{0, 16 << 20} {
			b.Run(fmt.Sprintf("size-%dMiB/tail-%dMiB", size>>20, tail>>20), func(b *testing.B) {
				data := b.TempDir()
				opts := Options{Logger: quiet, Flush: FlushOS, SegmentBytes: 1<<31 - 1} // one segment
				l, err := Open(data, "bench", 0, opts)
				if err != nil {
					b.Fatal(err)
				}
				i := int64(0)
				for ; l.Size() < size-tail; i++ {
					if err := l.Append(run.at(i * run.records)); err != nil {
						b.Fatal(err)
					}
				}
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				rpPath := filepath.Join(l.Dir(), recoveryPointName)
				rp, err := os.ReadFile(rpPath)
				if err != nil {
					b.Fatal(err)
				}
				if tail > 0 {
					// Append the tail and "crash": close the files without
					// a flush or a new recovery point.
					l, err = Open(data, "bench", 0, opts)
					if err != nil {
						b.Fatal(err)
					}
					for ; l.Size() < size; i++ {
						if err := l.Append(run.at(i * run.records)); err != nil {
							b.Fatal(err)
						}
					}
					l.closeFiles()
				}
				for b.Loop() {
					b.StopTimer()
					if err := os.WriteFile(rpPath, rp, 0o644); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					l, err := Open(data, "bench", 0, opts)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if len(l.Segments()) != 1 {
						b.Fatalf("segments %v", l.Segments())
					}
					if l.Size() < size {
						b.Fatalf("reopened %d bytes", l.Size())
					}
					l.closeFiles() // no Close: keep the recovery point as it was
					b.StartTimer()
				}
			})
		}
	}
}

// BenchmarkOpenNew measures what a first start-up with thousands of
// partitions pays per partition: Open of a new log in the data directory,
// with the topic id as the fetcher passes it ("open"), and that plus the
// first append and the Flush that makes it durable ("open-append-flush":
// the whole cost up to the first durable end). The logs stay open, as
// at a start-up, a thousand at a time.
func BenchmarkOpenNew(b *testing.B) {
	raw := batch.BuildRun(0, 1, 1, 10)
	for _, first := range []bool{false, true} {
		name := "open"
		if first {
			name = "open-append-flush"
		}
		b.Run(name, func(b *testing.B) {
			data := b.TempDir()
			opts := Options{Logger: quiet, Flush: FlushInterval, TopicID: TopicID{7}}
			var open []*Log
			closeAll := func() {
				for _, l := range open {
					if err := l.Close(); err != nil {
						b.Fatal(err)
					}
				}
				open = open[:0]
			}
			defer closeAll()
			p := int32(0)
			for b.Loop() {
				l, err := Open(data, "bench", p, opts)
				if err != nil {
					b.Fatal(err)
				}
				p++
				if first {
					if err := l.Append(raw); err != nil {
						b.Fatal(err)
					}
					if err := l.Flush(); err != nil {
						b.Fatal(err)
					}
				}
				open = append(open, l)
				if len(open) == 1000 {
					b.StopTimer()
					closeAll()
					b.StartTimer()
				}
			}
		})
	}
}
