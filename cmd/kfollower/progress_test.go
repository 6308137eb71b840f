package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/wire"
)

func fetching(p int32, hw, leo int64) partitionStatus {
	return partitionStatus{Status: fetcher.Status{Topic: "t", Partition: p, HighWatermark: hw, LogEndOffset: leo, Lag: max(hw-leo, 0)}, State: "fetching"}
}

// Catching up logs partitions caught up of total, throughput and an ETA
// from the records still to copy; caught up and idle logs nothing more.
func TestProgressReport(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(slog.New(slog.NewTextHandler(&buf, nil)))
	start := time.Unix(1000, 0)
	p.last = start
	p.Appended(1, wire.TopicPartition{Topic: "t"}, 50e6, 100_000) // 10 s at 5 MB/s, 10,000 records/s
	p.report(start.Add(10*time.Second), []partitionStatus{fetching(0, 500_000, 200_000), fetching(1, 10, 10)})
	line := buf.String()
	for _, want := range []string{`msg="catching up"`, "caught_up=1", "partitions=2", "lag_records=300000", "mb_per_s=5", "records_per_s=10000", "eta=30s"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress line %q lacks %q", line, want)
		}
	}
	caught := []partitionStatus{fetching(0, 10, 10)}
	buf.Reset()
	p.report(start.Add(20*time.Second), caught)
	if !strings.Contains(buf.String(), "caught up with every leader") {
		t.Errorf("caught up: %q", buf.String())
	}
	buf.Reset()
	p.report(start.Add(30*time.Second), caught)
	if buf.Len() != 0 {
		t.Errorf("caught up and idle, yet logged %q", buf.String())
	}
}

// Only fetching partitions count as caught up: one with no leader, whose
// last lag was 0, is counted apart and the line says so; a stalled one is
// not caught up either.
func TestProgressNoLeaderNotCaughtUp(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(slog.New(slog.NewJSONHandler(&buf, nil)))
	start := time.Unix(1000, 0)
	p.last = start
	noLeader := fetching(1, 10, 10)
	noLeader.State = "no-leader"
	stalled := fetching(2, 10, 10)
	stalled.State = "stalled"
	p.Appended(1, wire.TopicPartition{Topic: "t"}, 1234567, 10)
	p.report(start.Add(10*time.Second), []partitionStatus{fetching(0, 10, 10), noLeader, stalled})
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	if strings.Contains(line["msg"].(string), "caught up with every leader") && !strings.Contains(line["msg"].(string), "no leader") {
		t.Errorf("partitions without a leader or stalled, yet %q", line["msg"])
	}
	if line["caught_up"] != 1.0 || line["no_leader"] != 1.0 || line["stalled"] != 1.0 || line["partitions"] != 3.0 {
		t.Errorf("counts: %s", buf.String())
	}
	// mb_per_s is a number, as records_per_s is (issue 15 item 7).
	if v, ok := line["mb_per_s"].(float64); !ok || v != 0.123 {
		t.Errorf("mb_per_s %#v, want the number 0.123: %s", line["mb_per_s"], buf.String())
	}
	buf.Reset()
	p.report(start.Add(20*time.Second), []partitionStatus{fetching(0, 10, 10), noLeader})
	if !strings.Contains(buf.String(), "some partitions have no leader") {
		t.Errorf("no leader: %s", buf.String())
	}
}
