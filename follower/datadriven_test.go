package follower

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestStories runs the scripts in testdata/. Each command feeds one input to
// a Partition over a memLog, then plays the driver: it takes every Ready,
// prints it, carries out its actions on the memLog and calls Advance, until
// nothing is ready. Regenerate the expected output with
//
//	go test ./follower -run TestStories -rewrite
//
// and read the diff before committing it: it is the behaviour.
//
// Commands (see testdata/*.txt for use):
//
//	init [topic=T] [partition=N] [start=N] leo=N [discard-on-gap] [seed=N]
//	  EPOCH START        (input lines: the leader-epoch cache)
//	leader id=N epoch=N
//	reply-epoch [id=N] epoch=E end=O [error=NAME] [storage-error|storage-transient]
//	reply-fetch [id=N] [error=NAME] [hw=N] [log-start=N] [diverging=E@O] [records=ExN,...] [corrupt|storage-transient]
//	reply-offsets [id=N] [start=N] [end=N] [error=NAME]
//	fail [id=N] [error=NAME|text]
//	tick [advance=DURATION]
//	round leader=N     (EpochRound: the driver sends broker N a round of epoch queries)
//	status | log | stop
func TestStories(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		if path == endOffsetForTable {
			continue // a table of Kafka's answers, not a story
		}
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			var e *storyEnv
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				if d.Cmd == "init" {
					e = newStoryEnv(t, d)
					return e.log.String()
				}
				if e == nil {
					d.Fatalf(t, "%s before init", d.Cmd)
				}
				return e.handle(t, d)
			})
		})
	}
}

// storyBase is the fixed start of story time.
var storyBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type storyEnv struct {
	log *memLog
	p   *Partition
	now time.Time
}

func newStoryEnv(t *testing.T, d *datadriven.TestData) *storyEnv {
	cfg := Config{Topic: "t", Backoff: BackoffPolicy{Base: 100 * time.Millisecond, Max: time.Second}}
	l := &memLog{}
	for _, a := range d.CmdArgs {
		switch a.Key {
		case "topic":
			cfg.Topic = a.Vals[0]
		case "partition":
			cfg.Partition = int32(argInt(t, d, a.Key))
		case "start":
			l.start = argInt(t, d, a.Key)
		case "leo":
			l.leo = argInt(t, d, a.Key)
		case "discard-on-gap":
			cfg.DiscardOnGap = true
		case "seed":
			cfg.JitterSeed = uint64(argInt(t, d, a.Key))
		default:
			d.Fatalf(t, "init: unknown argument %q", a.Key)
		}
	}
	for _, e := range epochLines(t, d) {
		if n := len(l.epochs); n > 0 && (l.epochs[n-1].epoch >= e.epoch || l.epochs[n-1].start >= e.start) {
			d.Fatalf(t, "epoch line %d %d: epochs and starts must increase", e.epoch, e.start)
		}
		l.epochs = append(l.epochs, e)
	}
	if n := len(l.epochs); n > 0 && (l.epochs[0].start < l.start || l.epochs[n-1].start >= l.leo) {
		d.Fatalf(t, "epoch starts must lie in [start, leo)")
	}
	return &storyEnv{log: l, p: NewPartition(cfg, l), now: storyBase}
}

func (e *storyEnv) handle(t *testing.T, d *datadriven.TestData) string {
	var out strings.Builder
	var err error
	switch d.Cmd {
	case "leader":
		err = e.p.Step(e.now, LeaderChange{Leader: int32(argInt(t, d, "id")), LeaderEpoch: int32(argInt(t, d, "epoch"))})
	case "reply-epoch":
		err = e.p.Step(e.now, EpochReply{
			ID:        e.id(t, d),
			ErrorCode: argCode(t, d),
			Leader:    EpochEndOffset{Epoch: int32(argIntOr(t, d, "epoch", -1)), EndOffset: argIntOr(t, d, "end", -1)},
		})
	case "reply-fetch":
		m := FetchReply{
			ID:             e.id(t, d),
			ErrorCode:      argCode(t, d),
			HighWatermark:  argIntOr(t, d, "hw", -1),
			LogStartOffset: argIntOr(t, d, "log-start", -1),
			Diverging:      EpochEndOffset{Epoch: -1, EndOffset: -1},
		}
		if d.HasArg("diverging") {
			var s string
			d.ScanArgs(t, "diverging", &s)
			ep, off, ok := strings.Cut(s, "@")
			epoch, err1 := strconv.ParseInt(ep, 10, 32)
			end, err2 := strconv.ParseInt(off, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				d.Fatalf(t, "diverging=%q: want EPOCH@END", s)
			}
			m.Diverging = EpochEndOffset{Epoch: int32(epoch), EndOffset: end}
		}
		if d.HasArg("records") {
			var s string
			d.ScanArgs(t, "records", &s)
			bs, err := decodeBatches(s)
			if err != nil {
				d.Fatalf(t, "records: %v", err)
			}
			m.Records = encodeBatches(bs)
		}
		err = e.p.Step(e.now, m)
	case "reply-offsets":
		err = e.p.Step(e.now, OffsetsReply{
			ID:             e.id(t, d),
			ErrorCode:      argCode(t, d),
			LogStartOffset: argIntOr(t, d, "start", -1),
			LogEndOffset:   argIntOr(t, d, "end", -1),
		})
	case "fail":
		var cause error = errors.New("connection reset")
		if d.HasArg("error") {
			if c := argCode(t, d); c != 0 {
				cause = kerr.ErrorForCode(c)
			}
		}
		err = e.p.Step(e.now, RequestFailed{ID: e.id(t, d), Err: cause})
	case "tick":
		if d.HasArg("advance") {
			var s string
			d.ScanArgs(t, "advance", &s)
			dur, perr := time.ParseDuration(s)
			if perr != nil {
				d.Fatalf(t, "advance: %v", perr)
			}
			e.now = e.now.Add(dur)
		}
		fmt.Fprintf(&out, "now %s\n", e.now.Format("15:04:05.000"))
		err = e.p.Step(e.now, Tick{})
	case "round":
		leader := int32(argInt(t, d, "leader"))
		fmt.Fprintf(&out, "joins=%t\n", e.p.JoinsEpochRound(leader))
		err = e.p.Step(e.now, EpochRound{Leader: leader})
	case "stop":
		err = e.p.Step(e.now, Stop{})
	case "status":
		return e.p.Status().String()
	case "log":
		return e.log.String()
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	if err != nil {
		fmt.Fprintf(&out, "step: %v\n", err)
	}
	e.drive(t, d, &out)
	return strings.TrimSuffix(out.String(), "\n")
}

// drive plays the driver until the partition has nothing ready.
func (e *storyEnv) drive(t *testing.T, d *datadriven.TestData, out *strings.Builder) {
	corrupt := d.HasArg("corrupt")             // the next Append fails validation
	storageErr := d.HasArg("storage-error")    // the next action fails for good
	transient := d.HasArg("storage-transient") // the next action fails, and may not next time
	storageErr = storageErr || transient
	quiet := true
	for i := 0; e.p.HasReady(); i++ {
		if i > 20 {
			d.Fatalf(t, "partition never settles")
		}
		quiet = false
		rd := e.p.Ready()
		if len(rd.Actions) > 0 && rd.Request != nil {
			d.Fatalf(t, "a Ready with both actions and a request:\n%v", rd)
		}
		fmt.Fprintf(out, "%v\n", rd)
		var failed error
		for _, a := range rd.Actions {
			if storageErr {
				failed = errors.New("corrupt record batch in 00000000000000000000.log at byte 4096 (offset 12)")
				if transient {
					failed = errors.New("write 00000000000000000000.log: no space left on device")
				}
				break
			}
			switch a := a.(type) {
			case *MoveToLostFound:
				e.log.lostFound = append(e.log.lostFound, [2]int64{a.From, a.To})
			case *TruncateTo:
				e.log.truncateTo(a.Offset)
			case *TruncateFullyAndStartAt:
				e.log.truncateFully(a.Offset)
			case *Append:
				if corrupt {
					failed = errors.New("batch CRC mismatch")
					corrupt = false
					break
				}
				bs, err := decodeBatches(string(a.Records))
				if err == nil {
					err = e.log.appendBatches(a.Offset, bs)
				}
				if err != nil {
					d.Fatalf(t, "append: %v", err)
				}
			}
			if failed != nil {
				break
			}
		}
		if failed != nil {
			fmt.Fprintf(out, "driver: action failed: %v\n", failed)
			if err := e.p.Step(e.now, ActionFailed{Corrupt: !storageErr && !transient, Transient: transient, Err: failed}); err != nil {
				fmt.Fprintf(out, "step: %v\n", err)
			}
			continue
		}
		if len(rd.Actions) > 0 {
			fmt.Fprintf(out, "%v\n", e.log)
		}
		e.p.Advance(rd)
	}
	if quiet {
		out.WriteString("(nothing ready)\n")
	}
	if w := e.p.NextWake(); !w.IsZero() {
		fmt.Fprintf(out, "backoff until %s\n", w.Format("15:04:05.000"))
	}
}

// epochLines reads the input lines "EPOCH START", one an epoch entry.
func epochLines(t *testing.T, d *datadriven.TestData) []epochEntry {
	var es []epochEntry
	for line := range strings.SplitSeq(strings.TrimSpace(d.Input), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		var e epochEntry
		if _, err := fmt.Sscanf(line, "%d %d", &e.epoch, &e.start); err != nil {
			d.Fatalf(t, "epoch line %q: %v", line, err)
		}
		es = append(es, e)
	}
	return es
}

// id is the id= argument, or the id of the request in flight.
func (e *storyEnv) id(t *testing.T, d *datadriven.TestData) uint64 {
	if d.HasArg("id") {
		return uint64(argInt(t, d, "id"))
	}
	if e.p.inflight == nil {
		d.Fatalf(t, "no request in flight; give id=")
	}
	return e.p.inflight.RequestID()
}

func argInt(t *testing.T, d *datadriven.TestData, key string) int64 {
	var s string
	d.ScanArgs(t, key, &s)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "%s=%q: %v", key, s, err)
	}
	return v
}

func argIntOr(t *testing.T, d *datadriven.TestData, key string, def int64) int64 {
	if !d.HasArg(key) {
		return def
	}
	return argInt(t, d, key)
}

// argCode is the error= argument as a Kafka error code (0 if absent).
func argCode(t *testing.T, d *datadriven.TestData) int16 {
	if !d.HasArg("error") {
		return 0
	}
	var name string
	d.ScanArgs(t, "error", &name)
	for c := int16(-1); c < 200; c++ {
		if ke, ok := kerr.ErrorForCode(c).(*kerr.Error); ok && ke.Message == name && ke.Code == c {
			return c
		}
	}
	if name == "NOT_LEADER_OR_FOLLOWER" {
		return kerr.NotLeaderForPartition.Code
	}
	d.Fatalf(t, "unknown error %q", name)
	return 0
}
