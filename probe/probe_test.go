package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var allChecks = []string{CheckLineage, CheckEpochGaps, CheckFencing, CheckDiverging, CheckOffsets}

func run(t *testing.T, f *fakeLeader) *Report {
	t.Helper()
	rep, err := Run(context.Background(), Options{Cluster: f, Topics: []string{"t"}, Backoff: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Partitions) != 1 {
		t.Fatalf("%d partitions reported, want 1", len(rep.Partitions))
	}
	return rep
}

func statuses(p PartitionReport) map[string]Status {
	m := map[string]Status{}
	for _, c := range p.Checks {
		m[c.Check] = c.Status
	}
	return m
}

func table(t *testing.T, rep *Report) string {
	t.Helper()
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Against a leader that answers as Kafka does, every check passes, and the
// lineage is the leader's cache, with epoch 0 inferred at the log start
// or, after retention, the first entry where truncateFromStart put it.
func TestCorrectLeaderPasses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		f       *fakeLeader
		lineage string
	}{
		{"standard", standardLeader(), "0@0 2@100 5@150 7@200"},
		{"retained", retainedLeader(), "3@120 5@150 7@200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := run(t, tc.f)
			p := rep.Partitions[0]
			for _, c := range allChecks {
				if s := statuses(p)[c]; s != Pass {
					t.Errorf("%s: %s, want pass", c, s)
				}
			}
			if got := (lineage{entries: p.Lineage}).String(); got != tc.lineage {
				t.Errorf("lineage %s, want %s", got, tc.lineage)
			}
			if p.Error != "" || p.Attempts != 1 || p.LogEnd != tc.f.logEnd() || p.HighWatermark != tc.f.hw || p.LogStart != tc.f.logStart {
				t.Errorf("partition %+v", p)
			}
			if rep.ExitCode() != ExitOK {
				t.Errorf("exit code %d, want %d", rep.ExitCode(), ExitOK)
			}
			for _, c := range p.Checks {
				for _, o := range c.Evidence {
					if o.Status == Fail {
						t.Errorf("%s: failed observation %+v", c.Check, o)
					}
				}
			}
			t.Logf("\n%s", table(t, rep))
		})
	}
}

// Each check fires against a leader that answers wrongly in exactly the
// way that check exists for, and the others stay silent.
func TestEachCheckFires(t *testing.T) {
	fetches := 0
	for _, tc := range []struct {
		name  string
		fails string
		f     func() *fakeLeader
		// evidence is a part of the failed observation's answer.
		evidence string
	}{
		{
			name: "batch at an epoch's start stamped with the epoch before", fails: CheckLineage,
			f: func() *fakeLeader {
				f := standardLeader()
				for i := range f.batches {
					if f.batches[i].base == 150 {
						f.batches[i].epoch = 2
					}
				}
				return f
			},
			evidence: "first batch [150, 159] epoch 2",
		},
		{
			name: "batch before an epoch's start stamped with that epoch", fails: CheckLineage,
			f: func() *fakeLeader {
				f := standardLeader()
				for i := range f.batches {
					if f.batches[i].base == 190 {
						f.batches[i].epoch = 7
					}
				}
				return f
			},
			evidence: "first batch [190, 199] epoch 7",
		},
		{
			name: "an answer above the epoch asked breaks the walk", fails: CheckLineage,
			f: func() *fakeLeader {
				f := standardLeader()
				f.wrong = epochAnswer(4, 5, 200)
				return f
			},
			evidence: "(5, 200)",
		},
		{
			name: "(-1, -1) for an epoch between entries", fails: CheckEpochGaps,
			f: func() *fakeLeader {
				f := standardLeader()
				f.wrong = epochAnswer(3, -1, -1)
				return f
			},
			evidence: "error NONE, (-1, -1)",
		},
		{
			name: "an epoch above the current one the leader claims to know", fails: CheckEpochGaps,
			f: func() *fakeLeader {
				f := standardLeader()
				f.wrong = epochAnswer(8, 8, 250)
				return f
			},
			evidence: "error NONE, (8, 250)",
		},
		{
			name: "(-1, -1) below the first entry, as before KAFKA-7415", fails: CheckEpochGaps,
			f: func() *fakeLeader {
				f := retainedLeader()
				f.wrong = epochAnswer(0, -1, -1)
				return f
			},
			evidence: "error NONE, (-1, -1)",
		},
		{
			name: "ListOffsets ignores CurrentLeaderEpoch", fails: CheckFencing,
			f: func() *fakeLeader {
				f := standardLeader()
				f.noFence = map[kmsg.Key]bool{kmsg.ListOffsets: true}
				return f
			},
			evidence: "error NONE, offset 0",
		},
		{
			name: "OffsetsForLeaderEpoch ignores CurrentLeaderEpoch", fails: CheckFencing,
			f: func() *fakeLeader {
				f := standardLeader()
				f.noFence = map[kmsg.Key]bool{kmsg.OffsetForLeaderEpoch: true}
				return f
			},
			evidence: "error NONE, (7, 250)",
		},
		{
			name: "Fetch swaps FENCED and UNKNOWN_LEADER_EPOCH", fails: CheckFencing,
			f: func() *fakeLeader {
				f := standardLeader()
				f.swapFence = map[kmsg.Key]bool{kmsg.Fetch: true}
				return f
			},
			evidence: "error UNKNOWN_LEADER_EPOCH",
		},
		{
			name: "Fetch ignores LastFetchedEpoch", fails: CheckDiverging,
			f: func() *fakeLeader {
				f := standardLeader()
				f.ignoreLastFetched = true
				return f
			},
			evidence: "first batch [200, 209] epoch 7",
		},
		{
			name: "DivergingEpoch names the epoch's start, not its end", fails: CheckDiverging,
			f: func() *fakeLeader {
				f := standardLeader()
				f.wrong = func(_ int32, _ kmsg.Request, resp kmsg.Response) {
					if r, ok := resp.(*kmsg.FetchResponse); ok {
						if p := &r.Topics[0].Partitions[0]; p.DivergingEpoch.Epoch == 5 {
							p.DivergingEpoch.EndOffset = 150
						}
					}
				}
				return f
			},
			evidence: "DivergingEpoch (5, 150)",
		},
		{
			name: "the high watermark goes down within the epoch", fails: CheckOffsets,
			f: func() *fakeLeader {
				f := standardLeader()
				fetches = 0
				f.wrong = func(_ int32, _ kmsg.Request, resp kmsg.Response) {
					if r, ok := resp.(*kmsg.FetchResponse); ok {
						if fetches++; fetches == 6 {
							r.Topics[0].Partitions[0].HighWatermark -= 5
						}
					}
				}
				return f
			},
			evidence: "down from 240 to 235",
		},
		{
			name: "an LSO above the high watermark", fails: CheckOffsets,
			f: func() *fakeLeader {
				f := standardLeader()
				f.lso = 245
				return f
			},
			evidence: "LSO 245, high watermark 240",
		},
		{
			name: "a log end below the high watermark", fails: CheckOffsets,
			f: func() *fakeLeader {
				f := standardLeader()
				f.wrong = func(_ int32, req kmsg.Request, resp kmsg.Response) {
					if r, ok := resp.(*kmsg.ListOffsetsResponse); ok && req.(*kmsg.ListOffsetsRequest).Topics[0].Partitions[0].Timestamp == -1 {
						r.Topics[0].Partitions[0].Offset = 230
					}
				}
				return f
			},
			evidence: "log end 230",
		},
		{
			name: "the leader's Metadata names an epoch below its lineage's newest", fails: CheckOffsets,
			f: func() *fakeLeader {
				f := standardLeader()
				f.wrong = func(broker int32, _ kmsg.Request, resp kmsg.Response) {
					if r, ok := resp.(*kmsg.MetadataResponse); ok && broker == f.id {
						r.Topics[0].Partitions[0].LeaderEpoch = 6
					}
				}
				return f
			},
			evidence: "leader epoch 6",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := run(t, tc.f())
			p := rep.Partitions[0]
			if p.Error != "" {
				t.Fatalf("partition error %s", p.Error)
			}
			got := statuses(p)
			for _, c := range allChecks {
				if c == tc.fails {
					if got[c] != Fail {
						t.Errorf("%s: %s, want fail", c, got[c])
					}
				} else if got[c] == Fail {
					t.Errorf("%s: fail, want it silent", c)
				}
			}
			var found bool
			for _, c := range p.Checks {
				for _, o := range c.Evidence {
					if c.Check == tc.fails && o.Status == Fail && strings.Contains(o.Answer, tc.evidence) {
						found = true
					}
				}
			}
			out := table(t, rep)
			if !found {
				t.Errorf("no failed %s observation answered %q:\n%s", tc.fails, tc.evidence, out)
			}
			if rep.ExitCode() != ExitFail {
				t.Errorf("exit code %d, want %d", rep.ExitCode(), ExitFail)
			}
			if !strings.Contains(out, "FAIL  "+tc.fails) || !strings.Contains(out, tc.evidence) {
				t.Errorf("the table does not show the failure:\n%s", out)
			}
		})
	}
}

// epochAnswer makes OffsetsForLeaderEpoch(asked) answer (epoch, end).
func epochAnswer(asked, epoch int32, end int64) func(int32, kmsg.Request, kmsg.Response) {
	return func(_ int32, req kmsg.Request, resp kmsg.Response) {
		q, ok := req.(*kmsg.OffsetForLeaderEpochRequest)
		if !ok {
			return
		}
		if rp := q.Topics[0].Partitions[0]; rp.LeaderEpoch == asked && rp.CurrentLeaderEpoch == 7 {
			p := &resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
			p.LeaderEpoch, p.EndOffset = epoch, end
		}
	}
}

// A broker without the versions a check needs makes it not applicable,
// says so, and still passes the others; an epoch-0 partition has no stale
// epoch to fence with.
func TestNotApplicable(t *testing.T) {
	t.Run("Fetch below v12", func(t *testing.T) {
		f := standardLeader()
		f.maxVersions = map[kmsg.Key]int16{kmsg.Fetch: 11}
		rep := run(t, f)
		p := rep.Partitions[0]
		want := map[string]Status{CheckLineage: Pass, CheckEpochGaps: Pass, CheckFencing: Pass, CheckDiverging: NotApplicable, CheckOffsets: Pass}
		if got := statuses(p); !equalStatuses(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
		if c := p.Checks[3]; !strings.Contains(c.Reason, "below v12") {
			t.Errorf("reason %q", c.Reason)
		}
		if rep.ExitCode() != ExitOK {
			t.Errorf("exit code %d", rep.ExitCode())
		}
	})
	t.Run("Fetch below v9", func(t *testing.T) {
		f := standardLeader()
		f.maxVersions = map[kmsg.Key]int16{kmsg.Fetch: 8}
		f.noFence = map[kmsg.Key]bool{kmsg.Fetch: true} // v8 has no CurrentLeaderEpoch
		rep := run(t, f)
		c := rep.Partitions[0].Checks[2]
		var na int
		for _, o := range c.Evidence {
			if o.Status == NotApplicable && strings.HasPrefix(o.Request, "Fetch") {
				na++
			}
		}
		if c.Status != Pass || na != 2 {
			t.Fatalf("fencing %s with %d Fetch observations n/a, want pass with 2: %+v", c.Status, na, c.Evidence)
		}
	})
	t.Run("empty partition in epoch 0", func(t *testing.T) {
		f := &fakeLeader{id: 1, epoch: 0, cache: []Epoch{{Epoch: 0, StartOffset: 0}}}
		rep := run(t, f)
		p := rep.Partitions[0]
		want := map[string]Status{CheckLineage: NotApplicable, CheckEpochGaps: Pass, CheckFencing: Pass, CheckDiverging: Pass, CheckOffsets: Pass}
		if got := statuses(p); !equalStatuses(got, want) {
			t.Fatalf("statuses %v, want %v\n%s", got, want, table(t, rep))
		}
		if rep.ExitCode() != ExitOK {
			t.Errorf("exit code %d", rep.ExitCode())
		}
	})
}

func equalStatuses(a, b map[string]Status) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A leader change during a probe discards it: the partition is probed
// again under the new leadership, and reported once. Leadership that keeps
// moving is an error (exit 2), not a failed check.
func TestLeaderMovesDuringProbe(t *testing.T) {
	t.Run("once", func(t *testing.T) {
		f := standardLeader()
		moved := false
		f.onRequest = func(broker int32, req kmsg.Request) {
			// The first probe's closing Metadata from the leader sees
			// epoch 8: a new election, nothing written yet.
			if _, ok := req.(*kmsg.MetadataRequest); ok && broker == f.id && !moved {
				moved = true
				f.epoch = 8
				f.cache = append(f.cache, Epoch{Epoch: 8, StartOffset: f.logEnd()})
			}
		}
		rep := run(t, f)
		p := rep.Partitions[0]
		if p.Error != "" || p.Attempts != 2 || p.LeaderEpoch != 8 || rep.ExitCode() != ExitOK {
			t.Fatalf("attempts %d epoch %d error %q exit %d, want 2, 8, none, 0\n%s", p.Attempts, p.LeaderEpoch, p.Error, rep.ExitCode(), table(t, rep))
		}
		if got := (lineage{entries: p.Lineage}).String(); got != "0@0 2@100 5@150 7@200 8@250" {
			t.Errorf("lineage %s", got)
		}
	})
	t.Run("always", func(t *testing.T) {
		f := standardLeader()
		f.onRequest = func(broker int32, req kmsg.Request) {
			if _, ok := req.(*kmsg.MetadataRequest); ok && broker == f.id {
				f.epoch++
				f.cache = append(f.cache, Epoch{Epoch: f.epoch, StartOffset: f.logEnd()})
			}
		}
		rep := run(t, f)
		p := rep.Partitions[0]
		if p.Attempts != 3 || !strings.Contains(p.Error, "the leadership changed during the probe") || len(p.Checks) != 0 || rep.ExitCode() != ExitError {
			t.Fatalf("attempts %d error %q checks %d exit %d", p.Attempts, p.Error, len(p.Checks), rep.ExitCode())
		}
	})
}

// Topics and partitions that cannot be probed are reported with why, and
// exit 2; a failed check elsewhere still makes it 1.
func TestPartitionErrors(t *testing.T) {
	f := standardLeader()
	rep, err := Run(context.Background(), Options{Cluster: f, Topics: []string{"t", "missing"}, Partitions: []int32{0, 3}, Backoff: 1})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range rep.Partitions {
		names = append(names, p.Topic+"-"+string(rune('0'+p.Partition))+":"+p.Error)
	}
	want := []string{
		"missing-0:topic missing: UNKNOWN_TOPIC_OR_PARTITION",
		"missing-3:topic missing: UNKNOWN_TOPIC_OR_PARTITION",
		"t-0:",
		"t-3:t-3: not in the cluster's metadata",
	}
	for i := range want {
		if i >= len(names) || !strings.HasPrefix(names[i], want[i]) {
			t.Fatalf("partitions %q, want %q", names, want)
		}
	}
	if rep.ExitCode() != ExitError {
		t.Errorf("exit code %d, want %d", rep.ExitCode(), ExitError)
	}
	if _, err := Run(context.Background(), Options{Cluster: f}); err == nil {
		t.Error("no topic: no error")
	}
}

// The JSON form carries every observation of every check, with the rule.
func TestReportJSON(t *testing.T) {
	rep := run(t, standardLeader())
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	p := back.Partitions[0]
	if len(p.Checks) != 5 {
		t.Fatalf("%d checks", len(p.Checks))
	}
	for _, c := range p.Checks {
		if c.Rule == "" || c.Rule != Rules[c.Check] || len(c.Evidence) == 0 {
			t.Errorf("%s: rule %q, %d observations", c.Check, c.Rule, len(c.Evidence))
		}
	}
	if !bytes.Contains(b, []byte(`"request":"OffsetsForLeaderEpoch leaderEpoch=3 currentLeaderEpoch=7 (between entries 2@100 and 5@150)"`)) {
		t.Errorf("JSON lacks the check-2 question for epoch 3:\n%s", b)
	}
}

// An error code in the walk (a broker that fails a question it must
// answer) fails check 1 with that answer as evidence.
func TestWalkErrorCode(t *testing.T) {
	f := standardLeader()
	f.wrong = func(_ int32, req kmsg.Request, resp kmsg.Response) {
		if q, ok := req.(*kmsg.OffsetForLeaderEpochRequest); ok && q.Topics[0].Partitions[0].LeaderEpoch == 4 && q.Topics[0].Partitions[0].CurrentLeaderEpoch == 7 {
			resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode = kerr.UnknownServerError.Code
		}
	}
	rep := run(t, f)
	c := rep.Partitions[0].Checks[0]
	last := c.Evidence[len(c.Evidence)-1]
	if c.Status != Fail || last.Answer != "error UNKNOWN_SERVER_ERROR" || !strings.Contains(c.Reason, "leaderEpoch=4") {
		t.Fatalf("check 1 %s, reason %q, last %+v", c.Status, c.Reason, last)
	}
	if s := rep.Partitions[0].Checks[3].Status; s != NotApplicable {
		t.Errorf("diverging_epoch without a lineage: %s", s)
	}
}

// A batch the Fetch answer cuts (a broker that does not return the first
// batch whole, against KIP-74) is fetched again with room for it.
func TestFetchCutFirstBatch(t *testing.T) {
	f := standardLeader()
	f.wrong = func(_ int32, req kmsg.Request, resp kmsg.Response) {
		if r, ok := resp.(*kmsg.FetchResponse); ok && req.(*kmsg.FetchRequest).MaxBytes == fetchLimit {
			if p := &r.Topics[0].Partitions[0]; len(p.RecordBatches) > 0 {
				n := batch.HeaderSize + 1
				p.RecordBatches = p.RecordBatches[:n]
			}
		}
	}
	rep := run(t, f)
	if s := statuses(rep.Partitions[0]); s[CheckLineage] != Pass {
		t.Fatalf("%v\n%s", s, table(t, rep))
	}
}
