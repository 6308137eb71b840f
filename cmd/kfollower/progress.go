package main

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/wire"
)

// progress logs catch-up: partitions caught up of total, throughput, ETA.
// It observes the fetcher's appends.
type progress struct {
	fetcher.NopObserver
	logger *slog.Logger

	mu      sync.Mutex // guards bytes and records, added to by fetcher goroutines
	bytes   int64
	records int64

	// Owned by loop.
	wasCaughtUp bool
	last        time.Time
}

func newProgress(l *slog.Logger) *progress { return &progress{logger: l} }

// Appended is fetcher.Observer's.
func (p *progress) Appended(_ int32, _ wire.TopicPartition, bytes, records int64) {
	p.mu.Lock()
	p.bytes += bytes
	p.records += records
	p.mu.Unlock()
}

// loop samples every second (observe keeps lag-in-seconds fresh) and logs
// every interval until ctx ends.
func (p *progress) loop(ctx context.Context, interval time.Duration, statuses func() []partitionStatus, observe func()) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	p.last = time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			observe()
			if now.Sub(p.last) >= interval {
				p.report(now, statuses())
			}
		}
	}
}

// report logs one line. Only a partition that is fetching, with no lag,
// counts as caught up: one with no leader, reconciling, backing off or
// stalled has not caught up with anything, whatever its last lag was.
func (p *progress) report(now time.Time, ss []partitionStatus) {
	p.mu.Lock()
	bytes, records := p.bytes, p.records
	p.bytes, p.records = 0, 0
	p.mu.Unlock()
	secs := now.Sub(p.last).Seconds()
	p.last = now
	var caught, noLeader, stalled int
	var lag int64
	for _, s := range ss {
		switch {
		case s.State == "fetching" && s.HighWatermark >= 0 && s.Lag == 0:
			caught++
		case s.State == follower.StateNoLeader.String():
			noLeader++
		case s.State == "stalled":
			stalled++
		}
		lag += s.Lag
	}
	if len(ss) == 0 {
		p.logger.Info("no followed partition yet: waiting for metadata to list a matching topic")
		return
	}
	all := caught == len(ss)
	if all && p.wasCaughtUp && bytes == 0 {
		return // idle and caught up: nothing worth a line
	}
	rate := float64(records) / secs
	// mb_per_s is a number, as records_per_s, rounded to 3 significant
	// digits.
	mbps, _ := strconv.ParseFloat(strconv.FormatFloat(float64(bytes)/secs/1e6, 'g', 3, 64), 64)
	args := []any{"caught_up", caught, "partitions", len(ss), "no_leader", noLeader, "stalled", stalled, "lag_records", lag,
		"mb_per_s", mbps, "records_per_s", int64(rate)}
	switch {
	case all:
		p.logger.Info("caught up with every leader", args...)
	case caught+noLeader == len(ss):
		p.logger.Warn("caught up with every leader there is; some partitions have no leader", args...)
	case stalled > 0:
		p.logger.Warn("catching up; some leaders do not answer (stalled)", append(args, "eta", "unknown")...)
	case rate > 0:
		eta := time.Duration(float64(lag) / rate * float64(time.Second)).Round(time.Second)
		p.logger.Info("catching up", append(args, "eta", eta.String())...)
	default:
		p.logger.Info("catching up", append(args, "eta", "unknown")...)
	}
	p.wasCaughtUp = all
}
