package audit

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/kfollower/kfollower/storage"
)

// TestEpochWalkStories runs the scripts in testdata/: each is prose and
// commands, with the walk's questions and conclusions as golden output.
// The leader answers with storage.Epochs.EndOffsetFor, the port of Kafka's
// LeaderEpochFileCache.endOffsetFor (docs/kafka.md §3.1), so the walk is
// tested against the same function that answers our own reconciliation.
// Regenerate the expected output with
//
//	go test ./audit -run TestEpochWalkStories -rewrite
//
// and read the diff before committing it: it is the behaviour.
//
// Commands (see testdata/*.txt for use):
//
//	leader leo=N [log-start=N]     the leader's cache, one "EPOCH START" input
//	  EPOCH START                  line an entry; log-start defaults to the
//	                               first entry's start
//	walk [current=N]               walk it from its latest epoch (or N) until
//	                               done, printing each question and answer,
//	                               then the sequence found and whether it is
//	                               the leader's cache
//	start current=N log-start=N    a walk with no leader: answer plays it
//	answer epoch=E end=O           feed it one answer; prints what it asks
//	                               next, its error, or the sequence found
func TestEpochWalkStories(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var e walkStory
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return e.handle(t, d)
		})
	})
}

type walkStory struct {
	cache    storage.Epochs
	leo      int64
	logStart int64
	w        *epochWalk // of start, for answer
}

func (e *walkStory) handle(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "leader":
		var entries []storage.EpochEntry
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				d.Fatalf(t, "cache line %q: want EPOCH START", line)
			}
			epoch, err1 := strconv.ParseInt(f[0], 10, 32)
			start, err2 := strconv.ParseInt(f[1], 10, 64)
			if err1 != nil || err2 != nil {
				d.Fatalf(t, "cache line %q: want EPOCH START", line)
			}
			entries = append(entries, storage.EpochEntry{Epoch: int32(epoch), StartOffset: start})
		}
		c, err := storage.NewEpochs(entries...)
		if err != nil {
			d.Fatalf(t, "cache: %v", err)
		}
		e.cache, e.leo = c, argInt(t, d, "leo")
		e.logStart = entries[0].StartOffset
		if d.HasArg("log-start") {
			e.logStart = argInt(t, d, "log-start")
		}
		return fmt.Sprintf("cache %s, log start %d, log end %d", plainEpochs(entries), e.logStart, e.leo)
	case "walk":
		latest, ok := e.cache.Latest()
		if !ok {
			d.Fatalf(t, "walk before leader")
		}
		current := latest.Epoch
		if d.HasArg("current") {
			current = int32(argInt(t, d, "current"))
		}
		return e.walk(t, d, newEpochWalk(current, e.logStart))
	case "start":
		e.w = newEpochWalk(int32(argInt(t, d, "current")), argInt(t, d, "log-start"))
		next, _ := e.w.ask()
		return fmt.Sprintf("ask %d", next)
	case "answer":
		if e.w == nil {
			d.Fatalf(t, "answer before start")
		}
		if err := e.w.answer(int32(argInt(t, d, "epoch")), argInt(t, d, "end")); err != nil {
			e.w = nil // a driver drops a walk that failed
			return fmt.Sprintf("error: %v", err)
		}
		if next, ok := e.w.ask(); ok {
			return fmt.Sprintf("ask %d", next)
		}
		return fmt.Sprintf("done after %s: %s", questions(e.w.queries), walked(e.w.entries()))
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// walk runs w against the leader's cache to its end.
func (e *walkStory) walk(t *testing.T, d *datadriven.TestData, w *epochWalk) string {
	var out strings.Builder
	for n := 0; ; n++ {
		asked, ok := w.ask()
		if !ok {
			break
		}
		if n > 2*e.cache.Len()+3 {
			d.Fatalf(t, "the walk does not end")
		}
		epoch, end := e.cache.EndOffsetFor(asked, e.leo)
		fmt.Fprintf(&out, "ask %d: (%d, %d)\n", asked, epoch, end)
		if err := w.answer(epoch, end); err != nil {
			fmt.Fprintf(&out, "error: %v", err)
			return out.String()
		}
	}
	got := w.entries()
	fmt.Fprintf(&out, "done after %s: %s, log end %d\n", questions(w.queries), walked(got), w.leo)
	if slices.Equal(plain(got), e.cache.Entries()) {
		out.WriteString("the leader's cache exactly")
	} else {
		fmt.Fprintf(&out, "NOT the leader's cache %s", plainEpochs(e.cache.Entries()))
	}
	return out.String()
}

func argInt(t *testing.T, d *datadriven.TestData, key string) int64 {
	t.Helper()
	var s string
	d.ScanArgs(t, key, &s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "%s=%q: %v", key, s, err)
	}
	return n
}

func questions(n int) string {
	if n == 1 {
		return "1 question"
	}
	return fmt.Sprintf("%d questions", n)
}

// walked renders a walked sequence, marking the start the walk inferred.
func walked(es []Epoch) string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d@%d", e.Epoch, e.StartOffset)
		if e.Inferred {
			b.WriteString("(log start)")
		}
	}
	if len(es) == 0 {
		return "no epochs"
	}
	return b.String()
}

// plainEpochs renders a cache as walked renders a walk.
func plainEpochs(es []storage.EpochEntry) string {
	var out []Epoch
	for _, e := range es {
		out = append(out, Epoch{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	return walked(out)
}

func plain(es []Epoch) []storage.EpochEntry {
	var out []storage.EpochEntry
	for _, e := range es {
		out = append(out, storage.EpochEntry{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	return out
}

// Property: for random caches (monotonic, as Assign keeps them; first start
// at the log start, where truncateFromStart puts it) the walk returns the
// cache exactly, inferring only epoch 0's start, in at most entries+2
// questions.
func TestEpochWalkRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var entries []storage.EpochEntry
		epoch, off := int32(r.IntN(3)), int64(r.IntN(50))
		logStart := off
		for n := 1 + r.IntN(8); n > 0; n-- {
			entries = append(entries, storage.EpochEntry{Epoch: epoch, StartOffset: off})
			epoch += 1 + int32(r.IntN(3))
			off += 1 + int64(r.IntN(20))
		}
		c, err := storage.NewEpochs(entries...)
		if err != nil {
			t.Fatal(err)
		}
		leo := entries[len(entries)-1].StartOffset + int64(r.IntN(5))
		w := newEpochWalk(entries[len(entries)-1].Epoch, logStart)
		for e, ok := w.ask(); ok; e, ok = w.ask() {
			if w.queries > len(entries)+2 {
				t.Fatalf("cache %v: more than %d questions", entries, len(entries)+2)
			}
			if err := w.answer(c.EndOffsetFor(e, leo)); err != nil {
				t.Fatalf("cache %v (log start %d): %v", entries, logStart, err)
			}
		}
		got := w.entries()
		if !slices.Equal(plain(got), entries) || w.leo != leo {
			t.Fatalf("cache %v (log start %d, log end %d): walked %v, log end %d", entries, logStart, leo, got, w.leo)
		}
		for _, e := range got {
			if e.Inferred != (e.Epoch == 0) {
				t.Fatalf("cache %v: entry %+v: only epoch 0's start is inferred", entries, e)
			}
		}
	}
}
