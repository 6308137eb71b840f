package audit

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ee(epoch int32, start int64) storage.EpochEntry {
	return storage.EpochEntry{Epoch: epoch, StartOffset: start}
}

// walk runs an epochWalk against a leader whose cache is entries, answering
// with storage.Epochs.EndOffsetFor, the port of Kafka's
// LeaderEpochFileCache.endOffsetFor (kafka-internals.md §1.5).
func walk(t *testing.T, entries []storage.EpochEntry, leo, logStart int64) ([]Epoch, int) {
	t.Helper()
	c, err := storage.NewEpochs(entries...)
	if err != nil {
		t.Fatal(err)
	}
	latest, _ := c.Latest()
	w := newEpochWalk(latest.Epoch, logStart)
	for n := 0; ; n++ {
		e, ok := w.ask()
		if !ok {
			break
		}
		if n > 2*len(entries)+3 {
			t.Fatalf("walk of %v does not end", entries)
		}
		if err := w.answer(c.EndOffsetFor(e, leo)); err != nil {
			t.Fatalf("walk of %v: %v", entries, err)
		}
	}
	if w.leo != leo {
		t.Fatalf("walk of %v: log end %d, want %d", entries, w.leo, leo)
	}
	return w.entries(), w.queries
}

func plain(es []Epoch) []storage.EpochEntry {
	var out []storage.EpochEntry
	for _, e := range es {
		out = append(out, ee(e.Epoch, e.StartOffset))
	}
	return out
}

// The walk reproduces the leader's cache, including the §1.5 rows that make
// it subtle: R below the first epoch answers (R, first start), and R
// between entries answers the entry below.
func TestEpochWalkCases(t *testing.T) {
	cases := []struct {
		name     string
		cache    []storage.EpochEntry
		leo      int64
		logStart int64
		queries  int
	}{
		{"single epoch 0", []storage.EpochEntry{ee(0, 0)}, 10, 0, 1},
		{"epoch 0 after retention", []storage.EpochEntry{ee(0, 7)}, 10, 7, 1},
		{"unclean election 0 then 2", []storage.EpochEntry{ee(0, 0), ee(2, 300)}, 500, 0, 2},
		{"first epoch 1 (epoch 0 was empty)", []storage.EpochEntry{ee(1, 0)}, 10, 0, 2},
		{"first epoch 1 at log start 5", []storage.EpochEntry{ee(1, 5), ee(3, 9)}, 10, 5, 3},
		{"LeaderEpochFileCacheTest below first", []storage.EpochEntry{ee(5, 11), ee(6, 12), ee(7, 13)}, 20, 11, 5},
		{"LeaderEpochFileCacheTest gaps", []storage.EpochEntry{ee(0, 10), ee(2, 13), ee(4, 17)}, 20, 10, 3},
		{"empty current epoch", []storage.EpochEntry{ee(0, 0), ee(3, 40)}, 40, 0, 2},
		{"consecutive epochs", []storage.EpochEntry{ee(0, 0), ee(1, 5), ee(2, 6), ee(3, 9)}, 12, 0, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, q := walk(t, tc.cache, tc.leo, tc.logStart)
			if !slices.Equal(plain(got), tc.cache) {
				t.Fatalf("walked %v, want %v", got, tc.cache)
			}
			if q != tc.queries {
				t.Errorf("%d queries, want %d", q, tc.queries)
			}
			for _, e := range got {
				if e.Inferred != (e.Epoch == 0) {
					t.Errorf("entry %+v: inferred is for epoch 0 only", e)
				}
			}
		})
	}
}

// Property: for random caches (monotonic, as Assign keeps them; first start
// at the log start, where truncateFromStart puts it) the walk returns the
// cache exactly, in at most entries+2 questions.
func TestEpochWalkRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var cache []storage.EpochEntry
		epoch, off := int32(r.IntN(3)), int64(r.IntN(50))
		logStart := off
		for n := 1 + r.IntN(8); n > 0; n-- {
			cache = append(cache, ee(epoch, off))
			epoch += 1 + int32(r.IntN(3))
			off += 1 + int64(r.IntN(20))
		}
		leo := cache[len(cache)-1].StartOffset + int64(r.IntN(5))
		got, q := walk(t, cache, leo, logStart)
		if !slices.Equal(plain(got), cache) {
			t.Fatalf("cache %v (log start %d): walked %v", cache, logStart, got)
		}
		if q > len(cache)+2 {
			t.Fatalf("cache %v: %d queries", cache, q)
		}
	}
}

func TestEpochWalkRejectsNonsense(t *testing.T) {
	w := newEpochWalk(4, 0)
	if err := w.answer(-1, -1); err == nil {
		t.Fatal("(-1, -1) for the current epoch accepted")
	}
	w = newEpochWalk(4, 0)
	if err := w.answer(4, 100); err != nil {
		t.Fatal(err)
	}
	if err := w.answer(2, 200); err == nil {
		t.Fatal("an end offset above the log end accepted")
	}
	w = newEpochWalk(4, 0)
	_ = w.answer(4, 100)
	if err := w.answer(5, 50); err == nil {
		t.Fatal("an epoch above the one asked accepted")
	}
}

func le(epoch int32, start int64) Epoch { return Epoch{Epoch: epoch, StartOffset: start} }

func TestCompareEpochs(t *testing.T) {
	cases := []struct {
		name      string
		local     []storage.EpochEntry
		localEnd  int64
		leader    []Epoch
		leaderEnd int64
		want      int64 // parting offset, -1 for none
	}{
		{"empty local", nil, 0, []Epoch{le(0, 0)}, 10, -1},
		{"equal", []storage.EpochEntry{ee(0, 0), ee(2, 300)}, 500, []Epoch{le(0, 0), le(2, 300)}, 500, -1},
		{"prefix, leader further", []storage.EpochEntry{ee(0, 0)}, 300, []Epoch{le(0, 0), le(2, 300)}, 500, -1},
		{"unclean: local epoch 0 runs past the leader's", []storage.EpochEntry{ee(0, 0)}, 420, []Epoch{le(0, 0), le(2, 300)}, 500, 300},
		{"local epoch the leader never had", []storage.EpochEntry{ee(0, 0), ee(1, 300)}, 420, []Epoch{le(0, 0), le(2, 300)}, 500, 300},
		{"leader changed epoch earlier", []storage.EpochEntry{ee(0, 0), ee(2, 200)}, 420, []Epoch{le(0, 0), le(1, 100), le(2, 200)}, 500, 100},
		{"same epochs, other start", []storage.EpochEntry{ee(0, 0), ee(2, 250)}, 420, []Epoch{le(0, 0), le(2, 300)}, 500, 250},
		{"local past the leader's end", []storage.EpochEntry{ee(0, 0), ee(2, 300)}, 600, []Epoch{le(0, 0), le(2, 300)}, 500, 500},
		{"our log starts later", []storage.EpochEntry{ee(2, 350)}, 420, []Epoch{le(0, 0), le(2, 300)}, 500, -1},
		{"leader's log starts later (retention)", []storage.EpochEntry{ee(0, 0), ee(2, 300)}, 420, []Epoch{le(2, 350)}, 500, -1},
		{"old local epochs below the leader's start", []storage.EpochEntry{ee(0, 0), ee(1, 10), ee(2, 300)}, 420, []Epoch{le(2, 350)}, 500, -1},
		{"no leader epochs", []storage.EpochEntry{ee(0, 0)}, 10, nil, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := compareEpochs(tc.local, tc.localEnd, tc.leader, tc.leaderEnd)
			got := int64(-1)
			if p != nil {
				got = p.Offset
			}
			if got != tc.want {
				t.Fatalf("parting %+v, want offset %d", p, tc.want)
			}
		})
	}
}

func TestCheckTail(t *testing.T) {
	leader := []Epoch{le(0, 0), le(2, 300)}
	h := func(base int64, n int, epoch int32) batch.Header {
		hd, err := batch.Check(batch.Build(batch.Spec{BaseOffset: base, Records: n, Epoch: epoch}))
		if err != nil {
			t.Fatal(err)
		}
		return hd
	}
	if d := checkTail(h(300, 10, 2), leader, 500); d != nil {
		t.Fatalf("consistent tail batch reported: %+v", d)
	}
	if d := checkTail(h(300, 10, 0), leader, 500); d == nil || d.Kind != DivergedEpoch || d.Offset != 300 {
		t.Fatalf("epoch 0 at 300 when the leader has epoch 2 there: %+v", d)
	}
	if d := checkTail(h(290, 20, 0), leader, 500); d == nil || d.Kind != DivergedEpoch {
		t.Fatalf("batch spanning the leader's epoch change: %+v", d)
	}
	if d := checkTail(h(495, 10, 2), leader, 500); d == nil || d.Kind != DivergedMissing || d.Offset != 500 {
		t.Fatalf("batch past the leader's end: %+v", d)
	}
}

func TestExitCodes(t *testing.T) {
	r := &VerifyReport{Partitions: []PartitionVerify{{Status: StatusMatch}, {Status: StatusError}}}
	if r.ExitCode() != ExitError {
		t.Fatal("error not 2")
	}
	r.Partitions = append(r.Partitions, PartitionVerify{Status: StatusDiverged})
	if r.ExitCode() != ExitMismatch {
		t.Fatal("divergence not 1")
	}
	if (&VerifyReport{}).ExitCode() != ExitOK || ExitCodeFor(nil) != ExitOK || ExitCodeFor(&UsageError{"x"}) != ExitError {
		t.Fatal("ok/usage codes")
	}
}
