package probe

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
	"github.com/kfollower/kfollower/wire/server"
	"github.com/twmb/franz-go/pkg/kgo"
)

// serveCatalog serves one partition, t-0, from one log at one epoch.
type serveCatalog struct {
	log   *storage.Log
	epoch int32
}

func (c serveCatalog) Topics() []server.Topic {
	return []server.Topic{{Name: "t", ID: [16]byte{1, 15: 1}, Partitions: 1}}
}

func (c serveCatalog) Partition(topic string, p int32) (server.Log, int32, bool) {
	if topic != "t" || p != 0 {
		return nil, 0, false
	}
	return c.log, c.epoch, true
}

// serveLog is a local log of t-0 as a follower appends it: batches of
// epoch 0 (offsets 0–119), epoch 2 (120–219) and epoch 5 (220–339), ten
// records per batch, flushed on every append so DurableEnd is the log
// end. Epochs 1, 3 and 4 never led: the gaps check 2 asks about.
func serveLog(t *testing.T) *storage.Log {
	t.Helper()
	l, err := storage.Open(t.TempDir(), "t", 0, storage.Options{Flush: storage.FlushEveryAppend, SegmentBytes: 4 << 10,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	base := int64(0)
	for _, r := range []struct {
		epoch   int32
		batches int
	}{{0, 12}, {2, 10}, {5, 12}} {
		for range r.batches {
			if err := l.Append(batch.Build(batch.Spec{BaseOffset: base, Epoch: r.epoch, Records: 10})); err != nil {
				t.Fatalf("append at %d epoch %d: %v", base, r.epoch, err)
			}
			base += 10
		}
	}
	if l.LogEndOffset() != 340 || l.DurableEnd() != 340 {
		t.Fatalf("log end %d, durable end %d, want 340", l.LogEndOffset(), l.DurableEnd())
	}
	if len(l.Segments()) < 2 {
		t.Fatalf("%d segments; the test wants several", len(l.Segments()))
	}
	return l
}

// serve runs a server.Server over cat on a loopback port until the test
// ends, and checks that Serve returned nil.
func serve(t *testing.T, cat server.Catalog) string {
	t.Helper()
	s, err := server.New(server.Config{NodeID: 7, ClusterID: "kfollower-probe", Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// The probe against kfollower's own served endpoint (wire/server over a
// storage.Log), through a real kgo client: the read-only checks 1–5 all
// pass, whether the served epoch is the log's latest or a later one no
// batch carries yet (a leader elected that has written nothing: the
// server answers it as the entry Partition.makeLeader assigns at the log
// end).
func TestServe(t *testing.T) {
	for _, tc := range []struct {
		name    string
		epoch   int32
		lineage string
		// gaps are check 2's answers: each epoch between entries, and
		// the one above the current, with its (epoch, end offset).
		gaps map[int32]string
		// diverging are check 4's DivergingEpoch answers, sorted: for
		// an epoch past its end, or one the leader never had (epoch 4 at
		// 220 with a latest epoch of 5 gets (2, 220) as epoch 2 past 220 does).
		diverging []string
		// notApplicable are the requests of the observations that are
		// n/a: the start of an epoch no batch carries yet has nothing to
		// read.
		notApplicable []string
	}{
		{"latest epoch", 5, "0@0 2@120 5@220",
			map[int32]string{1: "(0, 120)", 3: "(2, 220)", 4: "(2, 220)", 6: "(-1, -1)"},
			[]string{"DivergingEpoch (0, 120)", "DivergingEpoch (2, 220)", "DivergingEpoch (2, 220)"}, nil},
		{"later epoch", 7, "0@0 2@120 5@220 7@340",
			map[int32]string{1: "(0, 120)", 3: "(2, 220)", 4: "(2, 220)", 6: "(5, 340)", 8: "(-1, -1)"},
			[]string{"DivergingEpoch (0, 120)", "DivergingEpoch (2, 220)", "DivergingEpoch (5, 340)"},
			[]string{"Fetch offset=340 lastFetchedEpoch=-1 currentLeaderEpoch=7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serve(t, serveCatalog{log: serveLog(t), epoch: tc.epoch})
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rep, err := Run(ctx, Options{Cluster: KgoCluster(cl), Topics: []string{"t"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Partitions) != 1 {
				t.Fatalf("%d partitions reported, want 1\n%s", len(rep.Partitions), table(t, rep))
			}
			p := rep.Partitions[0]
			failed := false
			if p.Error != "" {
				t.Errorf("t-0: %s", p.Error)
				failed = true
			}
			for _, c := range allChecks {
				if s := statuses(p)[c]; s != Pass {
					t.Errorf("%s: %s, want pass", c, s)
					failed = true
				}
			}
			if got := (lineage{entries: p.Lineage}).String(); got != tc.lineage {
				t.Errorf("lineage %q, want %q", got, tc.lineage)
				failed = true
			}
			if p.Leader != 7 || p.LeaderEpoch != tc.epoch || p.LogStart != 0 || p.HighWatermark != 340 || p.LogEnd != 340 || p.Attempts != 1 {
				t.Errorf("partition leader %d epoch %d log start %d hw %d log end %d attempts %d, want 7 %d 0 340 340 1",
					p.Leader, p.LeaderEpoch, p.LogStart, p.HighWatermark, p.LogEnd, p.Attempts, tc.epoch)
				failed = true
			}
			evidence := func(check string) []Observation {
				for _, c := range p.Checks {
					if c.Check == check {
						return c.Evidence
					}
				}
				return nil
			}
			gaps := map[int32]string{}
			for _, o := range evidence(CheckEpochGaps) {
				var e int32
				if _, err := fmt.Sscanf(o.Request, "OffsetsForLeaderEpoch leaderEpoch=%d", &e); err == nil {
					gaps[e] = strings.TrimPrefix(o.Answer, "error NONE, ")
				}
			}
			if !maps.Equal(gaps, tc.gaps) {
				t.Errorf("epochs between entries: answers %v, want %v", gaps, tc.gaps)
				failed = true
			}
			var diverging []string
			for _, o := range evidence(CheckDiverging) {
				if i := strings.Index(o.Answer, "DivergingEpoch ("); i >= 0 {
					diverging = append(diverging, o.Answer[i:i+strings.Index(o.Answer[i:], ")")+1])
				}
			}
			slices.Sort(diverging)
			if !slices.Equal(diverging, tc.diverging) {
				t.Errorf("DivergingEpoch answers %q, want %q", diverging, tc.diverging)
				failed = true
			}
			var na []string
			for _, c := range p.Checks {
				for _, o := range c.Evidence {
					switch o.Status {
					case Fail:
						t.Errorf("%s: failed observation %+v", c.Check, o)
						failed = true
					case NotApplicable:
						na = append(na, o.Request)
					}
				}
			}
			if !slices.Equal(na, tc.notApplicable) {
				t.Errorf("n/a observations %q, want %q", na, tc.notApplicable)
				failed = true
			}
			if rep.ExitCode() != ExitOK {
				t.Errorf("exit code %d, want %d", rep.ExitCode(), ExitOK)
				failed = true
			}
			if failed || testing.Verbose() {
				t.Logf("\n%s", table(t, rep))
			}
		})
	}
}
