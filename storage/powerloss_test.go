package storage

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The power-loss crash model: storage's crash model (appends, truncations,
// full truncations) and the lost+found sequence (TruncateWithLost, reports
// marked, flushes, reopens), with now and then a Flush held in its unlocked
// fsync (before or after the fsync itself) while the next one or two of
// those steps run, as fetcher's flusher runs beside the writer, run once on
// memFS, with a crash image taken
// before every file system operation that changes anything: the state a
// power cut at that instant leaves, strict (everything not synced
// forgotten; at every operation) and torn (an arbitrary part of it kept,
// in any order; at every other operation). Every image is then opened,
// which must succeed (a torn tail is never taken for corruption), and
// checked:
//
//   - the log is a prefix of the state before the operation in flight,
//     holding at least what was durable (DurableEnd) then, or a prefix of
//     the state after it (a partial append): nothing torn, no gap, no
//     truncated batch back, the epoch cache the batches give;
//   - lost+found holds exactly one complete event per loss whose
//     TruncateWithLost returned, and for the one in flight either nothing
//     (and the log untouched) or its event (and the log truncated), each
//     byte for byte the removed batches, with lost.json last; nothing
//     partial, no second copy;
//   - UnreportedLosses lists exactly the losses not yet marked reported,
//     the one in flight included when its event exists: a repeat only for
//     the loss whose MarkReported was in flight (at least once).
//
// Some images are also crashed again at every operation of their own
// recovery, and those images checked the same way. Everything is in
// memory and deterministic: powerLossSeedEnv runs one seed instead of the
// fixed ones (one per flush policy), and a failure names the step, the
// operation and the file system operation the power was cut before.
//
// Checked that it can fail: with a Flush that records its end although a
// truncation came during its fsync (no generation check), seeds 2 and 3
// fail (a durable end the image does not hold); without the fsync of the lost+found directory
// after the temporary event directory is complete, an intent can outlive
// its event ("lost+found event ... is missing"); without the fsync of a
// cut segment in truncateSegments, truncated batches come back; without
// writeFileAtomic's directory fsync, lost.json vanishes; without
// loadEpochs refusing an empty or unterminated leader-epoch-checkpoint
// (an Append's unsynced rewrite whose rename reached the disk before its
// data), seeds 2 and 3 fail ("epoch cache [], batches give ..."); without
// settle's fsync of the data directory (a new log's first fsync), seed 2
// finds the log gone below a reported durable end; with Open writing
// the recovery point before the checkpoint, a crash during recovery loses
// an epoch; without tornFrom, a torn image is refused as corruption.
const powerLossSeedEnv = "KFOLLOWER_POWERLOSS_SEED"

const plData = memData

// plSteps is the workload's length per seed; nestEvery: one image in so
// many is also crashed during its recovery.
const (
	plSteps   = 70
	nestEvery = 41
)

// plStep is one workload operation and what the uncrashed run left after it.
type plStep struct {
	op      []string // as crashModel.apply reads it, or "L", "R", "S", "C"
	model   crashModel
	durable int64
	// everDurable: a durable end above the log start was reported by
	// this step or an earlier one, so the log was settled.
	everDurable bool
	lost        *plLoss  // an L op that removed batches
	marking     []string // the IDs an R op marks
	pending     []string // IDs reported by TruncateWithLost and not yet marked, after this step
}

type plLoss struct {
	id                   string
	from, first, end     int64
	batches              int
	full                 bool
	offset               int64
	data                 []byte // the removed batches
	cause                string
	records, bytes, last int64
	verified             map[string][]byte // the event's files, once judged
}

type plImage struct {
	step  int // index into steps of the operation in flight; 0 is the first Open
	what  string
	fsys  *memFS
	torn  bool
	depth int // 1 for a crash during the recovery of an image
}

// plTopicID is the topic id the workload's log is opened with; images are
// opened without one, so that what they hold is seen.
var plTopicID = TopicID{0x4b, 0x46}

func plOptions(seed uint64, now *time.Time) Options {
	o := Options{Logger: quiet, SegmentBytes: 1200, IndexIntervalBytes: 150, Now: func() time.Time { return *now }, TopicID: plTopicID}
	o.Flush = []FlushPolicy{FlushOS, FlushEveryAppend, FlushInterval}[seed%3]
	o.FlushInterval = 250 * time.Millisecond
	return o
}

func TestPowerLoss(t *testing.T) {
	seeds := []uint64{1, 2, 3} // one per flush policy
	if s := os.Getenv(powerLossSeedEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", powerLossSeedEnv, s, err)
		}
		seeds = []uint64{n}
	}
	points, images := 0, 0
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p, i := runPowerLoss(t, seed, false)
			points, images = points+p, images+i
		})
	}
	t.Logf("%d crash points (every changing file system operation), %d crash images checked", points, images)
	if len(seeds) > 1 && points < 3000 {
		t.Errorf("only %d crash points: the model should cover thousands", points)
	}
}

// TestPowerLossStillClock is TestPowerLoss with a clock that stands still,
// so no Flush ever rewrites the recovery point (at most once a second),
// and with appends and Flushes only, since every truncation, reopen and
// Close replaces it fsynced: the point a new log's settle writes unsynced
// at the segment's start stays, and torn images of it meet the durable
// batches after it (seeds 12, 18, 25, 26). Seeds 15-17 first open the log without a
// topic id, truncate it fully (which settles it) and reopen it empty with
// one: partition.metadata of a settled log, which Open refuses torn.
// Checked that it can fail: with unsyncedPoint always false, seed 12
// fails in every run tried (9 of 9; 18, 25 and 26 in about two of three:
// the images vary from run to run, likely with the timing of the Flush
// held on another goroutine), an image with the point and the tail torn
// refused as corruption; with setTopicIDLocked writing unsynced for
// every unsettled log, seeds 15-17 fail (a torn partition.metadata
// refused).
func TestPowerLossStillClock(t *testing.T) {
	seeds := []uint64{12, 18, 25, 26, 15, 16, 17} // each flush policy (seed%3), without and with the prologue (seed%6 >= 3)
	if s := os.Getenv(powerLossSeedEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", powerLossSeedEnv, s, err)
		}
		seeds = []uint64{n}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runPowerLoss(t, seed, true) })
	}
}

// runPowerLoss runs one seed's workload and returns how many crash points
// it had and how many images it checked. still: the clock stands still,
// and appends and Flushes only; for a seed%6 of 3 to 5 the log is first opened
// without a topic id, then truncated fully and reopened with it
// (TestPowerLossStillClock).
func runPowerLoss(t *testing.T, seed uint64, still bool) (points, checked int) {
	m := newMemFS()
	now := time.UnixMilli(1_700_000_000_000)
	opts := plOptions(seed, &now)
	firstOpts := opts
	prologue := still && seed%6 >= 3
	if prologue {
		firstOpts.TopicID = TopicID{}
	}
	rng := rand.New(rand.NewPCG(seed, 11))
	tornRng := rand.New(rand.NewPCG(seed, 12))
	var images []plImage
	step := 0
	m.before = func(op int, what string) {
		points++
		images = append(images, plImage{step: step, what: what, fsys: m.imageLocked(nil)})
		if op%2 == 0 {
			images = append(images, plImage{step: step, what: what, fsys: m.imageLocked(tornRng), torn: true})
		}
	}
	var steps []plStep
	check := func() {
		for _, img := range images {
			checkPowerLoss(t, steps, img, opts)
			checked++
			// Crash the recovery too, at each of its operations.
			if checked%nestEvery == 0 {
				var nested []plImage
				fsys := img.fsys.crashImage(nil)
				fsys.before = func(_ int, what string) {
					nested = append(nested, plImage{step: img.step, what: img.what + ", then during recovery " + what, fsys: fsys.imageLocked(nil), depth: 1})
				}
				if l, err := openLog(fsys, plData, crashTopic, 0, opts); err == nil {
					l.Close()
				}
				for _, n := range nested {
					checkPowerLoss(t, steps, n, opts)
					checked++
				}
			}
		}
		images = images[:0]
	}
	// A Flush held in its fsync (gate) while the next steps run: the
	// flusher's fsync without the log's lock.
	g := &gateFS{fileSystem: m}
	var held struct {
		count   int // Flushes held so far
		steps   int // left before it is let go
		release chan struct{}
		done    chan error
	}
	l, err := openLog(g, plData, crashTopic, 0, firstOpts)
	if err != nil {
		t.Fatal(err)
	}
	steps = append(steps, plStep{op: []string{"O"}, model: crashModel{}, durable: 0})
	check()
	model := crashModel{}
	var pending []string
	for i := range plSteps {
		step = len(steps)
		if !still {
			now = now.Add(100 * time.Millisecond)
		}
		leo, start := l.LogEndOffset(), l.LogStartOffset()
		ep, _ := l.LatestEpoch()
		st := plStep{}
		var run func() error
		r := rng.IntN(100)
		if held.steps > 0 {
			r = rng.IntN(88) // no Flush (it would wait for the held one), no reopen
		}
		// One step in six with appends unsynced holds a Flush in its fsync
		// (before it or after it) for the next one or two steps.
		hold := held.steps == 0 && l.DurableEnd() < leo && rng.IntN(6) == 0
		forced := prologue && i < 2
		switch {
		case forced:
			// F, then C: a settled empty log reopened with a topic id.
			hold, r = false, []int{58, 94}[i]
		case still && held.steps == 0 && rng.IntN(4) == 0:
			r = 88 // a Flush
		case still:
			// Appends only besides: every truncation, reopen and Close
			// replaces the start point, fsynced.
			r = 0
		}
		switch {
		case hold:
			after := rng.IntN(2) == 0
			st.op = []string{"Y", fmt.Sprint(after)}
			run = func() error {
				entered, release := g.arm(logSuffix, after, nil)
				done := make(chan error, 1)
				fl := l
				go func() { done <- fl.Flush() }()
				select {
				case <-entered:
					held.steps, held.release, held.done = 1+rng.IntN(2), release, done
					held.count++
					return nil
				case err := <-done:
					return fmt.Errorf("Flush returned (%v) with appends unsynced: its fsync was not held", err)
				}
			}
		case !forced && (r < 50 || leo == start):
			count, n := 1+rng.IntN(3), 1+rng.IntN(4)
			if rng.IntN(6) == 0 {
				ep++
			}
			raw := crashRun(leo, ep, n, count)
			st.op = strings.Fields(fmt.Sprintf("A %d %d %d %d", leo, ep, n, count))
			run = func() error { return l.Append(raw) }
		case r < 58:
			to := max(start, leo-int64(rng.IntN(12)))
			st.op = []string{"T", fmt.Sprint(to)}
			run = func() error { return l.TruncateTo(to) }
		case r < 60:
			to := leo + int64(rng.IntN(5))
			if forced {
				to = 5
			}
			st.op = []string{"F", fmt.Sprint(to)}
			run = func() error { return l.TruncateFullyAndStartAt(to) }
		case r < 78:
			full := rng.IntN(6) == 0
			to := max(start, leo-1-int64(rng.IntN(12)))
			cause := CauseOffsetsForLeaderEpoch
			if full {
				to, cause = leo+int64(rng.IntN(3)), CauseDiscardedOnGap
			} else if start > 0 && rng.IntN(5) == 0 {
				to = start - 1 // below the log start: a full truncation
			}
			st.op = []string{"L", fmt.Sprint(to), fmt.Sprint(full)}
			st.lost = expectLoss(model, to, full, cause)
			run = func() error {
				lost, err := l.TruncateWithLost(Truncation{Offset: to, Full: full, Cause: cause, OldLeaderEpoch: ep, NewLeaderEpoch: ep + 1})
				if err == nil && st.lost != nil {
					if lost.ID == "" || lost.Batches != st.lost.batches {
						return fmt.Errorf("TruncateWithLost returned %+v, want the loss %+v", lost, *st.lost)
					}
					st.lost.id = lost.ID
					pending = append(pending, lost.ID)
				}
				return err
			}
		case r < 88:
			st.op = []string{"R"}
			st.marking = slices.Clone(pending)
			run = func() error {
				for _, x := range l.UnreportedLosses() {
					if err := l.MarkReported(x.ID); err != nil {
						return err
					}
				}
				pending = nil
				return nil
			}
		case r < 94:
			st.op = []string{"S"}
			run = l.Flush
		default:
			st.op = []string{"C"}
			run = func() error {
				if err := l.Close(); err != nil {
					return err
				}
				var err error
				l, err = openLog(g, plData, crashTopic, 0, opts)
				return err
			}
		}
		wasHeld := held.steps > 0
		if err := run(); err != nil {
			t.Fatalf("step %d %v: %v", step, st.op, err)
		}
		if wasHeld {
			if held.steps--; held.steps == 0 {
				close(held.release)
				if err := <-held.done; err != nil {
					t.Fatalf("step %d %v: the held Flush: %v", step, st.op, err)
				}
				st.op = append(st.op, "(then the held Flush)")
			}
		}
		switch st.op[0] {
		case "A", "T", "F":
			model.apply(st.op, 1<<30)
		case "L":
			to, _ := strconv.ParseInt(st.op[1], 10, 64)
			if st.op[2] == "true" {
				model.apply([]string{"F", st.op[1]}, 0)
			} else {
				model.apply([]string{"T", fmt.Sprint(to)}, 0)
			}
		}
		st.model, st.durable, st.pending = model.clone(), l.DurableEnd(), slices.Clone(pending)
		st.everDurable = steps[len(steps)-1].everDurable || st.durable > l.LogStartOffset()
		if got := crashState(t, l); !got.equal(model) {
			t.Fatalf("step %d %v: the log is %v, the model %v", step, st.op, got, model)
		}
		steps = append(steps, st)
		check() // the step's outcome is known: its images can be judged
	}
	if held.steps > 0 { // let the held Flush finish within the last step
		close(held.release)
		if err := <-held.done; err != nil {
			t.Fatalf("the held Flush: %v", err)
		}
	}
	// And a crash after the last step.
	step = len(steps)
	steps = append(steps, plStep{op: []string{"end"}, model: model.clone(), durable: l.DurableEnd(), pending: slices.Clone(pending),
		everDurable: steps[len(steps)-1].everDurable || l.DurableEnd() > l.LogStartOffset()})
	images = append(images, plImage{step: step, what: "after the last step", fsys: m.crashImage(nil)})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	m.before = nil
	check()
	t.Logf("seed %d, flush policy %d: %d steps (%d with a Flush held in its fsync), %d crash points, %d images", seed, opts.Flush, len(steps), held.count, points, checked)
	return points, checked
}

// expectLoss is what TruncateWithLost(to, full) must save from model.
func expectLoss(model crashModel, to int64, full bool, cause string) *plLoss {
	after := model.clone()
	kind := "T"
	if full {
		kind = "F"
	}
	after.apply([]string{kind, fmt.Sprint(to)}, 0)
	removed := model.batches[len(after.batches):]
	if to < model.start || full {
		removed = model.batches
	}
	if len(removed) == 0 {
		return nil
	}
	pl := &plLoss{from: to, full: full || to < model.start, offset: to, cause: cause, batches: len(removed)}
	if pl.full {
		pl.from = model.start
	}
	pl.first = removed[0][0]
	last := removed[len(removed)-1]
	pl.end, pl.last = last[0]+last[2], last[0]+last[2]-1
	for _, b := range removed {
		pl.data = append(pl.data, crashBatch(b[0], int32(b[1]), int(b[2]))...)
		pl.records += b[2]
	}
	pl.bytes = int64(len(pl.data))
	return pl
}

func modelEnd(m crashModel) int64 {
	if n := len(m.batches); n > 0 {
		return m.batches[n-1][0] + m.batches[n-1][2]
	}
	return m.start
}

// prefixOf: got starts where m does and holds a prefix of its batches
// ending at or after floor.
func prefixOf(got, m crashModel, floor int64) bool {
	return got.start == m.start && len(got.batches) <= len(m.batches) &&
		slices.Equal(got.batches, m.batches[:len(got.batches)]) && modelEnd(got) >= min(floor, modelEnd(m))
}

func checkPowerLoss(t *testing.T, steps []plStep, img plImage, opts Options) {
	t.Helper()
	st := steps[img.step]
	prev := steps[max(img.step-1, 0)]
	where := fmt.Sprintf("crash (torn %v) during step %d %v at %q", img.torn, img.step, st.op, img.what)
	fsys := img.fsys.crashImage(nil) // the image stays reusable
	opts.TopicID = TopicID{}
	l, err := openLog(fsys, plData, crashTopic, 0, opts)
	if err != nil {
		t.Fatalf("%s: Open after the power loss: %v", where, err)
	}
	defer l.Close()
	defer func() {
		if t.Failed() {
			t.Logf("in: %s", where)
		}
	}()
	got := crashState(t, l)
	// partition.metadata is written unsynced by the first Open, and
	// synced before the first durable end: from then on a crash keeps it.
	if id, ok := l.TopicID(); (ok || prev.everDurable) && id != plTopicID {
		t.Fatalf("%s: topic id %v (present %v), want %v (a durable end was reported: %v)", where, id, ok, plTopicID, prev.everDurable)
	}

	lostDir := LostFoundDir(plData, crashTopic, 0)
	ents, _ := fsys.ReadDir(lostDir)
	present := map[string]bool{}
	for _, e := range ents {
		if !IsLostEventName(e.Name()) {
			t.Fatalf("%s: lost+found holds %q, not a complete event", where, e.Name())
		}
		present[e.Name()] = true
	}
	expected := map[string]*plLoss{}
	for _, s := range steps[:img.step] {
		if s.lost != nil {
			expected[s.lost.id] = s.lost
			if !present[s.lost.id] {
				t.Fatalf("%s: the loss %s of a finished TruncateWithLost is not in lost+found", where, s.lost.id)
			}
		}
	}
	inflight := st.lost != nil && present[st.lost.id]
	if inflight {
		expected[st.lost.id] = st.lost
	}
	for id := range present {
		pl, ok := expected[id]
		if !ok {
			t.Fatalf("%s: lost+found holds %s, which no loss made (a second copy?)", where, id)
		}
		checkLostEvent(t, where, fsys, filepath.Join(lostDir, id), pl)
	}

	switch {
	case inflight:
		if !got.equal(st.model) {
			t.Fatalf("%s: the loss is in lost+found, so the log must be truncated: it is %v, want %v", where, got, st.model)
		}
	case st.lost != nil:
		if !prefixOf(got, prev.model, prev.durable) {
			t.Fatalf("%s: no loss in lost+found, so the log must be untouched (at least to %d): it is %v, was %v", where, prev.durable, got, prev.model)
		}
	default:
		if !prefixOf(got, prev.model, prev.durable) && !prefixOf(got, st.model, prev.durable) {
			t.Fatalf("%s: the log is %v; want a prefix, at least to %d, of\n%v or\n%v", where, got, prev.durable, prev.model, st.model)
		}
	}

	var unreported []string
	for _, x := range l.UnreportedLosses() {
		unreported = append(unreported, x.ID)
		if !present[x.ID] {
			t.Fatalf("%s: unreported loss %s has no lost+found event", where, x.ID)
		}
	}
	// Required: what was pending before the step, less what an R in flight
	// may have marked; allowed besides: the loss in flight.
	for _, id := range prev.pending {
		if !slices.Contains(unreported, id) && !slices.Contains(st.marking, id) {
			t.Fatalf("%s: loss %s was never marked reported, and is not listed as unreported (%v)", where, id, unreported)
		}
	}
	if inflight && !slices.Contains(unreported, st.lost.id) {
		t.Fatalf("%s: the loss %s completed by recovery is not listed as unreported (%v)", where, st.lost.id, unreported)
	}
	for _, id := range unreported {
		if !slices.Contains(prev.pending, id) && !(inflight && id == st.lost.id) {
			t.Fatalf("%s: loss %s is listed as unreported, but it was marked reported (%v)", where, id, prev.pending)
		}
	}
}

func checkLostEvent(t *testing.T, where string, fsys *memFS, dir string, pl *plLoss) {
	t.Helper()
	// An event directory is complete or absent, so one judged once is the
	// same bytes in every image: compare those, parse once.
	files := fsys.peekDir(dir)
	if pl.verified != nil {
		if !maps.EqualFunc(files, pl.verified, bytes.Equal) {
			t.Fatalf("%s: lost+found event %s differs from the one judged before", where, dir)
		}
		return
	}
	defer func() {
		if !t.Failed() {
			pl.verified = files
		}
	}()
	lost, err := readLost(fsys, dir)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	var data []byte
	for _, s := range lost.Segments {
		b, err := fsys.ReadFile(filepath.Join(dir, s))
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		data = append(data, b...)
	}
	tr := lost.Truncation
	if !bytes.Equal(data, pl.data) || lost.From != pl.from || lost.FirstOffset != pl.first || lost.LastOffset != pl.last ||
		lost.EndOffset != pl.end || lost.Batches != pl.batches || lost.Records != pl.records || lost.Bytes != pl.bytes ||
		lost.Cause != pl.cause || tr == nil || tr.Offset != pl.offset || tr.Full != pl.full {
		t.Fatalf("%s: lost+found event %s is %+v (%d bytes), want %+v", where, dir, lost, len(data), *pl)
	}
}

// peekDir returns the files directly in dir by name, their data not
// copied: for comparisons only.
func (m *memFS) peekDir(dir string) map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.lookup(dir)
	if err != nil || !d.dir {
		return nil
	}
	out := map[string][]byte{}
	for name, n := range d.entries {
		if !n.dir {
			out[name] = n.data
		}
	}
	return out
}
