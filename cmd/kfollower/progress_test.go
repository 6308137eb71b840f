package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/wire"
)

// Catching up logs partitions caught up of total, throughput and an ETA
// from the records still to copy; caught up and idle logs nothing more.
func TestProgressReport(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(slog.New(slog.NewTextHandler(&buf, nil)))
	start := time.Unix(1000, 0)
	p.last = start
	p.Appended(1, wire.TopicPartition{Topic: "t"}, 50e6, 100_000) // 10 s at 5 MB/s, 10,000 records/s
	p.report(start.Add(10*time.Second), []fetcher.Status{
		{Topic: "t", Partition: 0, HighWatermark: 500_000, LogEndOffset: 200_000, Lag: 300_000},
		{Topic: "t", Partition: 1, HighWatermark: 10, LogEndOffset: 10},
	})
	line := buf.String()
	for _, want := range []string{`msg="catching up"`, "caught_up=1", "partitions=2", "lag_records=300000", "mb_per_s=5", "records_per_s=10000", "eta=30s"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress line %q lacks %q", line, want)
		}
	}
	caught := []fetcher.Status{{Topic: "t", HighWatermark: 10, LogEndOffset: 10}}
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
