package storage

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kfollower/kfollower/wire/batch"
)

// The crash test re-executes the test binary as a child (TestMain sees
// crashChildEnv) that appends, truncates and saves losses in a loop
// (TruncateWithLost, MarkReported), and SIGKILLs it, over and over. The
// child journals each operation before ("B ...") and after ("E") it runs,
// and kills itself with SIGKILL right before its N-th file system
// operation that changes anything (killFS), N chosen by the parent: the
// kills land at chosen points, not after a sleep, so how many operations
// finish does not depend on the machine's speed. After every kill the
// parent reopens the log (running recovery) and checks that it is exactly
// the state after all finished operations, or after those plus (a prefix
// of) the one in flight: nothing torn, no gap, no truncated batch back, an
// epoch cache equal to the one the stored batches give, and in lost+found
// exactly one event per finished save (and the one in flight only with its
// truncation done), each reported until marked.
const (
	crashChildEnv = "KFOLLOWER_STORAGE_CRASH_CHILD"
	crashSeedEnv  = "KFOLLOWER_STORAGE_CRASH_SEED"
	crashKillEnv  = "KFOLLOWER_STORAGE_CRASH_KILL_AT"
	crashTopic    = "crash"
	// replaySeedEnv replays one TestCrashLoop run exactly: the seed it logs
	// gives the same children (their seeds, so their operations and flush
	// policies, on a clock of their own) and the same kill points.
	replaySeedEnv = "KFOLLOWER_CRASH_SEED"
)

// killFS passes through to the OS and SIGKILLs the process right before
// its kill-th operation that changes anything. SIGKILL keeps the page
// cache: this tests the order of steps, not fsyncs (TestPowerLoss does).
type killFS struct {
	osFS
	n, kill int
}

func (k *killFS) step() {
	if k.n++; k.n == k.kill {
		_ = syscall.Kill(syscall.Getpid(), syscall.SIGKILL) // delivered before Kill returns
		time.Sleep(time.Hour)
	}
}

func (k *killFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		k.step()
	}
	f, err := k.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return killFile{f, k}, nil
}

func (k *killFS) Rename(from, to string) error { k.step(); return k.osFS.Rename(from, to) }
func (k *killFS) Remove(name string) error     { k.step(); return k.osFS.Remove(name) }
func (k *killFS) MkdirAll(dir string) error    { k.step(); return k.osFS.MkdirAll(dir) }
func (k *killFS) Mkdir(dir string) error       { k.step(); return k.osFS.Mkdir(dir) }
func (k *killFS) SyncDir(dir string) error     { k.step(); return k.osFS.SyncDir(dir) }

type killFile struct {
	file
	k *killFS
}

func (f killFile) Write(b []byte) (int, error) { f.k.step(); return f.file.Write(b) }
func (f killFile) WriteAt(b []byte, off int64) (int, error) {
	f.k.step()
	return f.file.WriteAt(b, off)
}
func (f killFile) Truncate(size int64) error { f.k.step(); return f.file.Truncate(size) }
func (f killFile) Sync() error               { f.k.step(); return f.file.Sync() }

func crashOptions(seed uint64) Options {
	o := Options{Logger: quiet, SegmentBytes: 4096, IndexIntervalBytes: 300}
	o.Flush = []FlushPolicy{FlushOS, FlushOS, FlushEveryAppend, FlushInterval}[seed%4]
	o.FlushInterval = 5 * time.Millisecond
	return o
}

// crashBatch is the one batch content for (base, epoch, n), so the parent
// can check bytes without the child telling them. Transactions of two
// producers interleave with plain batches, so that the crash models
// check the .txnindex and the open transactions too: a one-record batch
// at a multiple of 4 is a marker of producer 1 + base/4%2 (ABORT unless
// base/4 is a multiple of 3), another batch at an offset not a multiple
// of 3 is transactional data of producer 1 + base%2, the rest plain.
func crashBatch(base int64, epoch int32, n int) []byte {
	sp := batch.Spec{BaseOffset: base, Epoch: epoch, Records: n,
		Timestamp: 1_700_000_000_000 + base, Value: bytes.Repeat([]byte{byte(base)}, int(base*7%200))}
	switch {
	case n == 1 && base%4 == 0:
		ctrl := byte(controlAbort)
		if base/4%3 == 0 {
			ctrl = controlCommit
		}
		sp.Control, sp.Transactional, sp.ProducerID = true, true, 1+base/4%2
		sp.Key, sp.Value = []byte{0, 0, 0, ctrl}, []byte{0, 0, 0, 0, 0, 0}
	case base%3 != 0:
		sp.Transactional, sp.ProducerID = true, 1+base%2
	}
	return batch.Build(sp)
}

// crashRun is count batches of n records from base in epoch ep: what the
// crash models append as "A base ep n count".
func crashRun(base int64, ep int32, n, count int) []byte {
	var raw []byte
	for i := range count {
		raw = append(raw, crashBatch(base+int64(i*n), ep, n)...)
	}
	return raw
}

func crashChild() {
	dir := os.Getenv(crashChildEnv)
	seed, _ := strconv.ParseUint(os.Getenv(crashSeedEnv), 10, 64)
	kill, _ := strconv.Atoi(os.Getenv(crashKillEnv))
	die := func(code int, err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(code)
	}
	j, err := os.OpenFile(filepath.Join(dir, "journal"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		die(2, err)
	}
	// A clock of its own, a millisecond a reading, so that the flush and
	// recovery point intervals, and so the operations, follow the seed.
	now := time.UnixMilli(1_700_000_000_000)
	opts := crashOptions(seed)
	opts.Now = func() time.Time { now = now.Add(time.Millisecond); return now }
	l, err := openLog(&killFS{kill: kill}, dir, crashTopic, 0, opts)
	if err != nil {
		die(3, err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	for {
		leo, start := l.LogEndOffset(), l.LogStartOffset()
		ep, _ := l.LatestEpoch()
		r := rng.IntN(100)
		var op string
		var run func() (string, error)
		switch {
		case r < 75 || leo == start:
			count, n := 1+rng.IntN(4), 1+rng.IntN(5)
			if rng.IntN(8) == 0 {
				ep++
			}
			raw := crashRun(leo, ep, n, count)
			op = fmt.Sprintf("A %d %d %d %d", leo, ep, n, count)
			run = func() (string, error) { return "", l.Append(raw) }
		case r < 85:
			to := max(start, leo-int64(rng.IntN(15)))
			op = fmt.Sprintf("T %d", to)
			run = func() (string, error) { return "", l.TruncateTo(to) }
		case r < 86:
			to := leo + int64(rng.IntN(5))
			op = fmt.Sprintf("F %d", to)
			run = func() (string, error) { return "", l.TruncateFullyAndStartAt(to) }
		case r < 95:
			to, full := max(start, leo-1-int64(rng.IntN(15))), rng.IntN(8) == 0
			if full {
				to = leo + int64(rng.IntN(3))
			}
			op = fmt.Sprintf("L %d %v", to, full)
			run = func() (string, error) {
				lost, err := l.TruncateWithLost(Truncation{Offset: to, Full: full, Cause: CauseOffsetsForLeaderEpoch})
				return lost.ID, err
			}
		default:
			op = "R"
			run = func() (string, error) {
				for _, x := range l.UnreportedLosses() {
					if err := l.MarkReported(x.ID); err != nil {
						return "", err
					}
				}
				return "", nil
			}
		}
		fmt.Fprintf(j, "B %s\n", op)
		id, err := run()
		if err != nil {
			die(4, fmt.Errorf("%s: %w", op, err))
		}
		fmt.Fprintf(j, "E %s\n", id)
	}
}

// crashModel is the expected log: its start and its batches.
type crashModel struct {
	start   int64
	batches [][3]int64 // base, epoch, records
}

func (m crashModel) clone() crashModel {
	return crashModel{m.start, append([][3]int64(nil), m.batches...)}
}

func (m crashModel) String() string { return fmt.Sprintf("start %d %v", m.start, m.batches) }

func (m *crashModel) apply(op []string, prefix int) {
	arg := func(i int) int64 { n, _ := strconv.ParseInt(op[i], 10, 64); return n }
	switch op[0] {
	case "A":
		base, ep, n, count := arg(1), arg(2), arg(3), int(arg(4))
		for i := range min(count, prefix) {
			m.batches = append(m.batches, [3]int64{base + int64(i)*n, ep, n})
		}
	case "T":
		to := arg(1)
		if to < m.start {
			m.start, m.batches = to, nil
			return
		}
		for len(m.batches) > 0 {
			b := m.batches[len(m.batches)-1]
			if b[0]+b[2]-1 < to {
				break
			}
			m.batches = m.batches[:len(m.batches)-1]
		}
	case "F":
		m.start, m.batches = arg(1), nil
	case "L":
		kind := "T"
		if op[2] == "true" {
			kind = "F"
		}
		m.apply([]string{kind, op[1]}, prefix)
	}
}

func (m crashModel) equal(o crashModel) bool { return m.String() == o.String() }

// crashState reads the log into a model, checking every batch's bytes and
// contiguity on the way, and the epoch cache against the batches.
func crashState(t *testing.T, l *Log) crashModel {
	t.Helper()
	st := crashModel{start: l.LogStartOffset()}
	all := readAll(t, l)
	s := batch.NewScanner(all)
	next := st.start
	var cache Epochs
	for s.Next() {
		h := s.Header()
		if h.BaseOffset != next {
			t.Fatalf("gap or overlap: batch at %d, expected %d", h.BaseOffset, next)
		}
		n := int(h.LastOffsetDelta) + 1
		if !bytes.Equal(s.Batch(), crashBatch(h.BaseOffset, h.PartitionLeaderEpoch, n)) {
			t.Fatalf("batch at %d has unexpected bytes", h.BaseOffset)
		}
		st.batches = append(st.batches, [3]int64{h.BaseOffset, int64(h.PartitionLeaderEpoch), int64(n)})
		cache, _, _ = cache.Assign(h.PartitionLeaderEpoch, h.BaseOffset)
		next = h.NextOffset()
	}
	if s.Err() != nil || s.Tail() != 0 {
		t.Fatalf("scan: %v tail %d", s.Err(), s.Tail())
	}
	if l.LogEndOffset() != next {
		t.Fatalf("LEO %d, batches end at %d", l.LogEndOffset(), next)
	}
	if !cache.Equal(l.Epochs()) {
		t.Fatalf("epoch cache %v, batches give %v", l.Epochs(), cache)
	}
	checkTxns(t, l, all)
	return st
}

// checkTxns checks that each segment's .txnindex and transaction snapshot
// are exactly what the log's batches give, read from the log start with
// no transaction open there (the crash models never move the start past
// an open one), and so are the LSO (at DurableEnd) and the aborted
// transactions.
func checkTxns(t *testing.T, l *Log, all []byte) {
	t.Helper()
	bases := l.Segments()
	seg := func(off int64) int {
		i := 0
		for i+1 < len(bases) && bases[i+1] <= off {
			i++
		}
		return i
	}
	want := make([][]abortedTxn, len(bases))
	states := make([]txnState, len(bases))
	st := txnState{}
	states[0] = txnState{}
	var aborted []AbortedTxn
	durable := l.DurableEnd()
	lsoWant := durable
	for s := batch.NewScanner(all); s.Next(); {
		h := s.Header()
		for i := seg(h.BaseOffset); i > 0 && states[i] == nil; i-- {
			states[i] = maps.Clone(st)
		}
		c, lso, ok := st.apply(h, markerType(h, s.Batch()))
		if ok && c.last >= durable {
			lsoWant = min(lsoWant, c.first) // its marker is not durable yet
		}
		if ok && c.aborted {
			i := seg(c.last)
			want[i] = append(want[i], abortedTxn{c.pid, c.first, c.last, lso})
			aborted = append(aborted, AbortedTxn{ProducerID: c.pid, FirstOffset: c.first})
		}
	}
	for i := range states {
		if states[i] == nil {
			states[i] = maps.Clone(st)
		}
	}
	for i, b := range bases {
		data, err := l.fsys.ReadFile(filepath.Join(l.Dir(), segmentName(b, txnIndexSuffix)))
		if i == len(bases)-1 && isNotExist(err) {
			err = nil // the active segment's is created on demand
		}
		if err != nil || !bytes.Equal(data, encodeTxnIndex(want[i])) {
			t.Fatalf("segment %d: .txnindex %x (%v), the batches give %x", b, data, err, encodeTxnIndex(want[i]))
		}
		data, err = l.fsys.ReadFile(filepath.Join(l.Dir(), segmentName(b, txnStateSuffix)))
		if l.unsettled && isNotExist(err) {
			continue // an empty log's comes with its first append (settle)
		}
		if got, perr := parseTxnState(data, b); err != nil || perr != nil || !maps.Equal(got, states[i]) {
			t.Fatalf("segment %d: transaction snapshot %q (%v, %v), the batches give %v", b, data, err, perr, states[i])
		}
	}
	if got, want := l.LastStableOffset(), max(st.firstOpen(lsoWant), min(l.LogStartOffset(), durable)); got != want {
		t.Fatalf("LSO %d, the batches give %d (durable %d, open %v)", got, want, durable, st)
	}
	if got := l.AbortedTransactions(l.LogStartOffset(), l.LogEndOffset()); !slices.Equal(got, append([]AbortedTxn{}, aborted...)) {
		t.Fatalf("aborted transactions %v, the batches give %v", got, aborted)
	}
}

// crashJournal is what a killed child's journal says: the operations
// that finished (with the event ID a TruncateWithLost returned, "" else)
// and the one in flight, if any.
type crashJournal struct {
	done     [][]string
	ids      []string
	inflight []string
}

func readJournal(t *testing.T, path string) crashJournal {
	t.Helper()
	var jr crashJournal
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return jr
	}
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	// The last element follows the last newline: a line the kill cut, or
	// "". A cut "B" line was written before its operation began.
	for _, line := range lines[:len(lines)-1] {
		switch {
		case strings.HasPrefix(line, "B ") && jr.inflight == nil:
			jr.inflight = strings.Fields(line)[1:]
		case strings.HasPrefix(line, "E ") && jr.inflight != nil:
			jr.done, jr.ids, jr.inflight = append(jr.done, jr.inflight), append(jr.ids, strings.TrimPrefix(line, "E ")), nil
		default:
			t.Fatalf("journal out of order at %q", line)
		}
	}
	return jr
}

func TestCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop skipped in -short")
	}
	dir := t.TempDir()
	kills := 0
	model := crashModel{}
	runSeed := uint64(time.Now().UnixNano())
	if s := os.Getenv(replaySeedEnv); s != "" {
		var err error
		if runSeed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", replaySeedEnv, s, err)
		}
	}
	t.Logf("run seed %d (replay with %s=%d)", runSeed, replaySeedEnv, runSeed)
	rng := rand.New(rand.NewPCG(runSeed, 1))
	ops := 0
	during := map[string]int{}
	events := map[string]bool{} // lost+found events made so far
	lostDir := LostFoundDir(dir, crashTopic, 0)
	for iter := 0; iter < 60; iter++ {
		seed := rng.Uint64()
		// Most kills land in the loop; one in four among the first
		// operations, which are Open's recovery of the last kill.
		kill := 20 + rng.IntN(400)
		if rng.IntN(4) == 0 {
			kill = 1 + rng.IntN(20)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashSeedEnv+"="+strconv.FormatUint(seed, 10),
			crashKillEnv+"="+strconv.Itoa(kill))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The child kills itself; a deadline in case it never does.
		stuck := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
		err := cmd.Wait()
		if !stuck.Stop() {
			t.Fatalf("child %d (seed %d) did not reach operation %d in 2 minutes", iter, seed, kill)
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("child exited on its own: %v\n%s", err, stderr.String())
		}
		kills++

		jr := readJournal(t, filepath.Join(dir, "journal"))
		// A child killed before it opened the journal must not replay the
		// previous one.
		if err := os.Remove(filepath.Join(dir, "journal")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		ops += len(jr.done)
		for i, op := range jr.done {
			model.apply(op, 1<<30)
			if jr.ids[i] != "" {
				events[jr.ids[i]] = true
			}
		}
		l, err := Open(dir, crashTopic, 0, crashOptions(seed))
		if err != nil {
			t.Fatalf("child %d (seed %d, killed at %d): open after kill: %v", iter, seed, kill, err)
		}
		got := crashState(t, l)
		candidates := []crashModel{model}
		if jr.inflight != nil {
			during[jr.inflight[0]]++
			n := 1
			if jr.inflight[0] == "A" {
				n, _ = strconv.Atoi(jr.inflight[4])
			}
			for p := 1; p <= n; p++ {
				c := model.clone()
				c.apply(jr.inflight, p)
				candidates = append(candidates, c)
			}
		}
		ok := false
		for _, c := range candidates {
			if c.equal(got) {
				ok = true
			}
		}
		if !ok {
			t.Fatalf("child %d (seed %d, killed at %d): after kill during %v the log is\n%v\nwant one of\n%v", iter, seed, kill, jr.inflight, got, candidates)
		}
		model = got
		// lost+found: every finished save, and the one in flight only if
		// Open completed its truncation; nothing partial.
		ents, _ := os.ReadDir(lostDir)
		extra := 0
		for _, e := range ents {
			if !IsLostEventName(e.Name()) {
				t.Fatalf("child %d (seed %d, killed at %d): lost+found holds %q", iter, seed, kill, e.Name())
			}
			if !events[e.Name()] {
				extra++
				events[e.Name()] = true
			}
		}
		lostInFlight := jr.inflight != nil && jr.inflight[0] == "L" && !candidates[1].equal(candidates[0])
		truncated := lostInFlight && got.equal(candidates[1])
		if len(ents) != len(events) || extra > 1 || (extra == 1) != truncated {
			t.Fatalf("child %d (seed %d, killed at %d): lost+found holds %d events (%d new) after kill during %v, %d saves known",
				iter, seed, kill, len(ents), extra, jr.inflight, len(events)-extra)
		}
		// Report what is unreported, as the driver does after Open.
		for _, x := range l.UnreportedLosses() {
			if !events[x.ID] {
				t.Fatalf("child %d: unreported loss %s has no event", iter, x.ID)
			}
			if err := l.MarkReported(x.ID); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
	}
	t.Logf("%d kills (during append/truncate/full/lost/report: %d/%d/%d/%d/%d), %d finished operations, final %d batches, %d losses saved",
		kills, during["A"], during["T"], during["F"], during["L"], during["R"], ops, len(model.batches), len(events))
	if ops < 100 {
		t.Errorf("only %d operations finished: the chosen kill points are too early to test much", ops)
	}
}
