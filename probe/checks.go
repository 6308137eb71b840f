package probe

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The checks, by their stable names (the README says what each means).
const (
	// CheckLineage: the epoch sequence OffsetsForLeaderEpoch reveals
	// agrees with the epochs stamped in the batches.
	CheckLineage = "lineage_matches_data"
	// CheckEpochGaps: epochs the partition never had, between entries,
	// below the first and above the current one, get endOffsetFor's
	// answers.
	CheckEpochGaps = "epochs_between_entries"
	// CheckFencing: a stale or future CurrentLeaderEpoch is refused by
	// Fetch, ListOffsets and OffsetsForLeaderEpoch.
	CheckFencing = "leader_epoch_fencing"
	// CheckDiverging: a Fetch with a LastFetchedEpoch/offset pair the
	// leader lacks gets DivergingEpoch and no records.
	CheckDiverging = "diverging_epoch"
	// CheckOffsets: log start ≤ LSO ≤ high watermark ≤ log end, the high
	// watermark never goes down within an epoch, and Metadata's epoch is
	// at least the lineage's newest.
	CheckOffsets = "offsets_and_watermarks"
)

// Rules cites, for each check (the failover scenario's too), the rule, the
// Kafka code that keeps it and the section of docs/kafka.md that explains
// it. Read-only.
var Rules = map[string]string{
	CheckLineage:   "KIP-101; UnifiedLog.append → LeaderEpochFileCache.assign; docs/kafka.md §2.1, §2.2",
	CheckEpochGaps: "KIP-279, KAFKA-7415; LeaderEpochFileCache.endOffsetFor; docs/kafka.md §3.1",
	CheckFencing:   "KIP-320; Partition.checkCurrentLeaderEpoch (getLocalLog); docs/kafka.md §6.1, §3.2",
	CheckDiverging: "KIP-595 (Fetch v12); Partition.readRecords; docs/kafka.md §5.1",
	CheckOffsets:   "Partition.maybeIncrementLeaderHW, UnifiedLog LSO, Partition.makeLeader; docs/kafka.md §8.1, §8.3, §2.6, §6.5",

	CheckFailoverEpoch: "KIP-101; the controller gives every new leader epoch + 1 (PartitionChangeBuilder); docs/kafka.md §2.1, §11.1",
	CheckFailoverStart: "KIP-101; Partition.makeLeader assigns the new epoch at the log end before any write; docs/kafka.md §2.6",
}

func newCheck(name string) CheckResult { return CheckResult{Check: name, Rule: Rules[name]} }

// partitionProbe runs the checks on one partition, sending everything to
// its leader fenced with the epoch Metadata named.
type partitionProbe struct {
	l        *leaderConn
	vers     apiVersions
	cur      int32
	logStart int64
	lin      lineage
	linOK    bool
	hwReads  int
}

// checkLineage (check 1) reports the walk, then fetches the batch at each
// epoch's start and the one before it, whose partition leader epochs must
// be those the walk gives their offsets: a leader stamps its epoch into
// every batch it writes, and the cache entry of an epoch starts at its
// first batch (LeaderEpochFileCache.assign on the append path).
func (p *partitionProbe) checkLineage(ctx context.Context, walk []Observation, violation string) (CheckResult, error) {
	c := newCheck(CheckLineage)
	c.Evidence = append(c.Evidence, walk...)
	if violation != "" {
		c.Reason = "the walk of OffsetsForLeaderEpoch could not be completed: " + violation
		return c.finish(""), nil
	}
	for i, e := range p.lin.entries {
		s := e.StartOffset
		f, desc, err := p.l.fetch(ctx, s, p.cur, -1, p.logStart)
		if err != nil {
			return c, err
		}
		exp := fmt.Sprintf("NONE, a batch starting at %d (the start of epoch %d) with partition leader epoch %d", s, e.Epoch, e.Epoch)
		o := Observation{Request: desc, Answer: f.String(), Expected: exp}
		if h := f.first; !o.unreadable(f) {
			want, _ := p.lin.epochAt(max(h.BaseOffset, s))
			// The first entry may start inside a batch: DeleteRecords can
			// put the log start there (truncateFromStart, docs/kafka.md
			// §2.4). A batch after s means s itself was compacted away.
			spans := h.BaseOffset < s && !(i == 0 && s <= p.logStart)
			o.Status = passIf(!spans && h.PartitionLeaderEpoch == want)
			if h.BaseOffset > s {
				o.Expected += fmt.Sprintf(", or (no batch at %d: compacted) the next batch with epoch %d", s, want)
			}
		}
		c.add(o)
		if i == 0 || s <= p.logStart {
			continue
		}
		prev := p.lin.entries[i-1]
		f, desc, err = p.l.fetch(ctx, s-1, p.cur, -1, p.logStart)
		if err != nil {
			return c, err
		}
		o = Observation{Request: desc, Answer: f.String(),
			Expected: fmt.Sprintf("NONE, a batch ending at %d (before epoch %d starts) with partition leader epoch %d", s-1, e.Epoch, prev.Epoch)}
		switch h := f.first; {
		case o.unreadable(f):
		case h.BaseOffset >= s:
			o.Status = NotApplicable
			o.Expected += fmt.Sprintf("; no batch ends at %d (compacted)", s-1)
		default:
			want, _ := p.lin.epochAt(h.BaseOffset)
			o.Status = passIf(h.LastOffset() == s-1 && h.PartitionLeaderEpoch == want)
		}
		c.add(o)
	}
	// The walk's answers can fail the check, but only the batches can pass
	// it.
	r := c.finish("")
	if r.Status == Pass && !slices.ContainsFunc(r.Evidence[len(walk):], func(o Observation) bool { return o.Status == Pass }) {
		r.Status, r.Reason = NotApplicable, "no committed batch to compare with the lineage"
	}
	return r, nil
}

// unreadable judges a Fetch answer with no batch to compare: Fail for an
// error code or an invalid batch, n/a when a consumer may read nothing
// there yet. It reports whether it judged o.
func (o *Observation) unreadable(f fetched) bool {
	switch {
	case f.ErrorCode != 0 || f.scanErr != nil:
		o.Status = Fail
	case f.first == nil:
		o.Status = NotApplicable
		o.Expected += fmt.Sprintf("; nothing there a consumer may read yet (high watermark %d)", f.HighWatermark)
	default:
		return false
	}
	return true
}

// checkEpochGaps (check 2) asks about epochs that were never this leader's
// epochs: between two entries X and Y the answer is (X, start of Y), the
// largest epoch below and where it ends (KIP-279); below the first entry F
// it is (asked, start of F) (KAFKA-7415); above the current epoch it is
// (-1, -1) with no error (docs/kafka.md §3.1: no epoch error for a large
// epoch; only the fence gives one).
func (p *partitionProbe) checkEpochGaps(ctx context.Context) (CheckResult, error) {
	c := newCheck(CheckEpochGaps)
	type ask struct {
		epoch int32
		why   string
	}
	var asks []ask
	if p.linOK {
		es := p.lin.entries
		for i := 1; i < len(es); i++ {
			x, y := es[i-1].Epoch, es[i].Epoch
			for _, r := range gapSamples(x, y) {
				asks = append(asks, ask{r, fmt.Sprintf("between entries %s and %s", es[i-1], es[i])})
			}
		}
		if len(es) > 0 && es[0].Epoch > 0 {
			for _, r := range gapSamples(-1, es[0].Epoch) {
				asks = append(asks, ask{r, fmt.Sprintf("below the first entry %s", es[0])})
			}
		}
	} else {
		c.Reason = "no lineage (see " + CheckLineage + "): only the epoch above the current one was asked"
	}
	asks = append(asks, ask{p.cur + 1, "above the current epoch"})
	for _, q := range asks {
		a, err := p.l.epochs(ctx, p.cur, q.epoch)
		if err != nil {
			return c, err
		}
		want := wire.EpochEndOffset{Epoch: -1, EndOffset: -1}
		if q.epoch <= p.cur {
			want = p.lin.endOffsetFor(q.epoch)
		}
		c.add(Observation{
			Request:  fmt.Sprintf("OffsetsForLeaderEpoch leaderEpoch=%d currentLeaderEpoch=%d (%s)", q.epoch, p.cur, q.why),
			Answer:   fmt.Sprintf("error %s, (%d, %d)", wire.ErrorName(a.ErrorCode), a.Epoch, a.EndOffset),
			Expected: fmt.Sprintf("error NONE, (%d, %d)", want.Epoch, want.EndOffset),
			Status:   passIf(a.ErrorCode == 0 && a.EpochEndOffset == want),
		})
	}
	return c.finish(""), nil
}

// gapSamples picks the epochs strictly between lo and hi to ask about: the
// first, the middle and the last (a long run of empty epochs need not be
// asked one by one).
func gapSamples(lo, hi int32) []int32 {
	if hi-lo < 2 {
		return nil
	}
	s := []int32{lo + 1, lo + (hi-lo)/2, hi - 1}
	slices.Sort(s)
	return slices.Compact(s)
}

// checkFencing (check 3) sends each of the three fenced APIs with
// CurrentLeaderEpoch one below the current epoch (FENCED_LEADER_EPOCH) and
// one above it (UNKNOWN_LEADER_EPOCH), to the leader.
func (p *partitionProbe) checkFencing(ctx context.Context) (CheckResult, error) {
	c := newCheck(CheckFencing)
	type api struct {
		name string
		key  kmsg.Key
		min  int16
		send func(epoch int32) (desc, answer string, code int16, err error)
	}
	apis := []api{
		{"OffsetsForLeaderEpoch", kmsg.OffsetForLeaderEpoch, epochsCurrentEpoch, func(e int32) (string, string, int16, error) {
			a, err := p.l.epochs(ctx, e, p.cur)
			return fmt.Sprintf("OffsetsForLeaderEpoch leaderEpoch=%d currentLeaderEpoch=%d", p.cur, e),
				fmt.Sprintf("error %s, (%d, %d)", wire.ErrorName(a.ErrorCode), a.Epoch, a.EndOffset), a.ErrorCode, err
		}},
		{"ListOffsets", kmsg.ListOffsets, listOffsetsCurrentEpoch, func(e int32) (string, string, int16, error) {
			a, err := p.l.logStart(ctx, e)
			return fmt.Sprintf("ListOffsets EARLIEST currentLeaderEpoch=%d", e),
				fmt.Sprintf("error %s, offset %d", wire.ErrorName(a.ErrorCode), a.Offset), a.ErrorCode, err
		}},
		{"Fetch", kmsg.Fetch, fetchCurrentLeaderEpoch, func(e int32) (string, string, int16, error) {
			f, desc, err := p.l.fetch(ctx, p.logStart, e, -1, p.logStart)
			return desc, f.String(), f.ErrorCode, err
		}},
	}
	for _, a := range apis {
		for _, q := range []struct {
			epoch int32
			want  *kerr.Error
		}{{p.cur - 1, kerr.FencedLeaderEpoch}, {p.cur + 1, kerr.UnknownLeaderEpoch}} {
			o := Observation{Expected: wire.ErrorName(q.want.Code)}
			switch {
			case !p.vers.has(a.key, a.min):
				o.Request = fmt.Sprintf("%s currentLeaderEpoch=%d", a.name, q.epoch)
				o.Answer = fmt.Sprintf("not sent: the broker's %s versions end below v%d, which added CurrentLeaderEpoch", a.name, a.min)
				o.Status = NotApplicable
			case q.epoch < 0:
				o.Request = fmt.Sprintf("%s currentLeaderEpoch=%d", a.name, q.epoch)
				o.Answer = "not sent: the current epoch is 0, so there is no stale epoch (-1 means no fence)"
				o.Status = NotApplicable
			default:
				desc, answer, code, err := a.send(q.epoch)
				if err != nil {
					return c, err
				}
				o.Request, o.Answer = fmt.Sprintf("%s (current epoch %d)", desc, p.cur), answer
				o.Status = passIf(code == q.want.Code)
			}
			c.add(o)
		}
	}
	return c.finish("the broker supports none of the fenced versions"), nil
}

// checkDiverging (check 4) fetches with LastFetchedEpoch/offset pairs the
// leader does not have, each must get DivergingEpoch = endOffsetFor(epoch)
// with no records; and with one pair it has, which must not.
func (p *partitionProbe) checkDiverging(ctx context.Context) (CheckResult, error) {
	c := newCheck(CheckDiverging)
	switch {
	case !p.vers.has(kmsg.Fetch, fetchLastFetchedEpoch):
		c.Reason = fmt.Sprintf("the broker's Fetch versions end below v%d, which added LastFetchedEpoch", fetchLastFetchedEpoch)
		return c.finish(""), nil
	case !p.linOK:
		c.Reason = "no lineage (see " + CheckLineage + ") to choose epochs and offsets from"
		return c.finish(""), nil
	}
	es, end := p.lin.entries, p.lin.logEnd
	type pair struct {
		epoch  int32
		offset int64
		why    string
	}
	var pairs []pair
	// Past the end of the newest few epochs before the current one.
	for i, n := len(es)-2, 0; i >= 0 && n < 3; i-- {
		if e := p.lin.endOf(i); e+1 <= end {
			pairs = append(pairs, pair{es[i].Epoch, e + 1, fmt.Sprintf("one past the end %d of epoch %d", e, es[i].Epoch)})
			n++
		}
	}
	// An epoch the leader never had, at the start of the entry above it.
	for i := len(es) - 1; i > 0; i-- {
		if r := es[i].Epoch - 1; r > es[i-1].Epoch {
			pairs = append(pairs, pair{r, es[i].StartOffset, fmt.Sprintf("epoch %d, which the leader never had, at the start of epoch %d", r, es[i].Epoch)})
			break
		}
	}
	// An epoch below the first entry, past the first entry's start.
	if len(es) > 0 && es[0].Epoch > 0 && es[0].StartOffset+1 <= end {
		pairs = append(pairs, pair{es[0].Epoch - 1, es[0].StartOffset + 1, fmt.Sprintf("epoch %d, below the first entry %s", es[0].Epoch-1, es[0])})
	}
	// A pair the leader has: the end of the epoch before the current one,
	// or the log end of the current one.
	if n := len(es); n >= 2 {
		pairs = append(pairs, pair{es[n-2].Epoch, p.lin.endOf(n - 2), fmt.Sprintf("exactly the end of epoch %d: the leader has it", es[n-2].Epoch)})
	} else if n == 1 {
		pairs = append(pairs, pair{es[0].Epoch, end, fmt.Sprintf("the log end of the current epoch %d: the leader has it", es[0].Epoch)})
	}
	for _, q := range pairs {
		f, desc, err := p.l.fetch(ctx, q.offset, p.cur, q.epoch, p.logStart)
		if err != nil {
			return c, err
		}
		o := Observation{Request: fmt.Sprintf("%s (%s)", desc, q.why), Answer: f.String()}
		// Partition.readRecords: the pair diverges when the leader's
		// endOffsetFor(lastFetchedEpoch) names a smaller epoch, or ends
		// before the fetch offset.
		e := p.lin.endOffsetFor(q.epoch)
		if e.Epoch < q.epoch || e.EndOffset < q.offset {
			o.Expected = fmt.Sprintf("error NONE, DivergingEpoch (%d, %d), no records", e.Epoch, e.EndOffset)
			o.Status = passIf(f.ErrorCode == 0 && f.Diverging == e && len(f.Records) == 0)
		} else {
			o.Expected = "error NONE, no DivergingEpoch"
			o.Status = passIf(f.ErrorCode == 0 && f.Diverging.Epoch < 0)
		}
		c.add(o)
	}
	return c.finish("the lineage has a single epoch 0: no pair the leader lacks stays so while records are written"), nil
}

// checkOffsets (check 5) reads the high watermark a few more times, then
// the log end, and checks every Fetch answer of the probe fenced with the
// current epoch: log start ≤ LSO ≤ high watermark in each (UnifiedLog's
// LSO is the first open transaction below the high watermark, or the high
// watermark), the high watermark never lower than the one before
// (Partition.maybeIncrementLeaderHW only moves it forward), and the log
// end, read last, at or above them. It returns the log end; epochObs adds
// the epochs once Metadata has been read again.
func (p *partitionProbe) checkOffsets(ctx context.Context) (CheckResult, int64, error) {
	c := newCheck(CheckOffsets)
	at := p.lin.logEnd
	if !p.linOK {
		at = p.logStart
	}
	for range p.hwReads {
		if _, _, err := p.l.fetch(ctx, at, p.cur, -1, p.logStart); err != nil {
			return c, -1, err
		}
	}
	leo, err := p.l.logEnd(ctx, p.cur)
	if err != nil {
		return c, -1, err
	}
	hws := p.l.hws
	if len(hws) == 0 {
		return c, leo.Offset, nil
	}
	var bad []string
	for _, s := range hws {
		if !(s.earliest <= s.logStart && s.logStart <= s.lso && s.lso <= s.hw) {
			bad = append(bad, fmt.Sprintf("%s: log start %d (ListOffsets EARLIEST before it: %d), LSO %d, high watermark %d", s.request, s.logStart, s.earliest, s.lso, s.hw))
		}
	}
	c.add(Observation{
		Request:  fmt.Sprintf("the %d Fetch answers fenced with epoch %d", len(hws), p.cur),
		Answer:   orDash(strings.Join(bad, "; ")),
		Expected: "in each: the log start ListOffsets EARLIEST gave before it ≤ log start ≤ LSO ≤ high watermark",
		Status:   passIf(len(bad) == 0),
	})
	var seq []string
	down := ""
	for i, s := range hws {
		seq = append(seq, fmt.Sprint(s.hw))
		if i > 0 && s.hw < hws[i-1].hw && down == "" {
			down = fmt.Sprintf("; down from %d to %d at %s", hws[i-1].hw, s.hw, s.request)
		}
	}
	c.add(Observation{
		Request:  fmt.Sprintf("the high watermarks of those answers, in order (all in epoch %d)", p.cur),
		Answer:   strings.Join(seq, " ") + down,
		Expected: "each at least the one before",
		Status:   passIf(down == ""),
	})
	last := hws[len(hws)-1].hw
	c.add(Observation{
		Request:  fmt.Sprintf("ListOffsets LATEST replicaId=-2 currentLeaderEpoch=%d, after them", p.cur),
		Answer:   fmt.Sprintf("error %s, log end %d", wire.ErrorName(leo.ErrorCode), leo.Offset),
		Expected: fmt.Sprintf("error NONE, a log end ≥ %d (the last high watermark) and ≥ %d (the current epoch's end in the walk)", last, p.lin.logEnd),
		Status:   passIf(leo.ErrorCode == 0 && leo.Offset >= last && leo.Offset >= p.lin.logEnd),
	})
	return c, leo.Offset, nil
}

// epochObs adds check 5's epoch observations: the leader's own Metadata,
// read after everything else, names an epoch at least the lineage's newest
// (a leader assigns its epoch before writing in it, Partition.makeLeader),
// and no batch fetched carries an epoch above Metadata's.
func (p *partitionProbe) epochObs(c *CheckResult, leaderMeta int32) {
	if p.linOK {
		c.add(Observation{
			Request:  fmt.Sprintf("Metadata from the leader, broker %d, after the probe", p.l.pm.Leader),
			Answer:   fmt.Sprintf("leader epoch %d", leaderMeta),
			Expected: fmt.Sprintf("at least %d, the newest epoch of the lineage", p.lin.latest()),
			Status:   passIf(leaderMeta >= p.lin.latest()),
		})
	}
	if p.l.maxBatchEpoch >= 0 {
		c.add(Observation{
			Request:  "the partition leader epochs of the batches fetched",
			Answer:   fmt.Sprintf("at most %d (the batch at %d)", p.l.maxBatchEpoch, p.l.maxBatchAt),
			Expected: fmt.Sprintf("at most %d, Metadata's leader epoch", p.cur),
			Status:   passIf(p.l.maxBatchEpoch <= p.cur),
		})
	}
}
