package fetcher

import (
	"fmt"
	"slices"
	"sync"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
)

// The served leader epoch (docs/design.md §11): the epoch a server of
// the copy names as its own leadership of a partition, in Metadata and in
// the KIP-320 fences of Fetch, ListOffsets and OffsetsForLeaderEpoch. It is
// this copy's epoch, not the upstream one, under four rules:
//
//   - it never goes down, across restarts too: storage.ServedEpoch keeps it
//     in the partition directory (never in leader-epoch-checkpoint, which
//     stays the upstream lineage), durable before it is served; the floor
//     0 is not written (a missing file reads -1 and is raised to 0 again
//     at the next open, before serving);
//   - it is at least the log's latest epoch, so no batch served carries an
//     epoch above the one Metadata names (the fence check of a downstream
//     reader, follower.CheckBatchEpochAboveLeader);
//   - it is at least the upstream leader epoch the partition has
//     reconciled with (the state machine fetches at it): not merely seen
//     in Metadata, since before the reconciliation the copy may still hold
//     what that leader lost, and a reader validating at the new epoch
//     would be told its records stand;
//   - it rises on every local truncation that removes anything, and the
//     partition is not served while it truncates (the server answers as a
//     broker that does not lead it: NOT_LEADER_OR_FOLLOWER, a retriable
//     error). A downstream reader holding the old epoch is then fenced,
//     refreshes Metadata, asks OffsetsForLeaderEpoch for its last epoch
//     and truncates where this copy's history of it now ends, as against
//     a broker (KIP-320, KIP-279): a Java consumer with LogTruncation-
//     Exception, librdkafka with its truncation detection, another
//     kfollower with its reconciliation. Without the rise, a reader past
//     the new log end would only see OFFSET_OUT_OF_RANGE.
//
// A run that serves nothing (Config.NotServed) keeps only what a later
// serving run needs: the file is never lowered, and a truncation still
// raises it past the epoch it held, which a reader of an earlier serving
// run may hold; the other two rules are met by the next serving open,
// which raises it to the log's latest epoch before it serves, and by the
// reconciliation with the upstream leader that run makes before it fetches.
// So after a leader move nothing is written per partition (at 10,000
// partitions those writes and fsyncs were seconds of the reconciliation).

// servedPartLog is a partition's log as the driver holds it: every
// truncation goes through the catalog (truncate), every other call to the
// log itself.
type servedPartLog struct {
	partLog
	tp wire.TopicPartition
	c  *catalog
}

// serve wraps l, just opened for tp, and loads tp's served epoch, raised to
// the log's latest epoch (and to 0); a served epoch that cannot be read or written
// fails the open, as any other file of the partition does.
func (m *Manager) serve(tp wire.TopicPartition, l partLog) (partLog, error) {
	dir := storage.PartitionDir(m.cfg.DataDir, tp.Topic, tp.Partition)
	se, err := storage.OpenServedEpoch(dir)
	if err == nil {
		// 0 at the least, as a partition's first leader: a reader must
		// never fetch unfenced (epoch -1 skips the KIP-320 check), or a
		// truncation would reach it as OFFSET_OUT_OF_RANGE. Unserved, 0
		// alone, which writes nothing, so that a truncation rises past
		// the 0 an earlier run may have served.
		floor := int32(0)
		if !m.catalog.notServed {
			latest, _ := l.LatestEpoch()
			floor = max(latest, 0)
		}
		err = se.Raise(floor)
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("opening the local log of %s: %w", tp, err)
	}
	m.catalog.load(tp, se)
	return &servedPartLog{partLog: l, tp: tp, c: &m.catalog}, nil
}

// Stage passes a staging through to the log if it takes one: a staged
// batch is no part of the log, so nothing a reader is fenced by changes.
func (l *servedPartLog) Stage(field []byte, first bool, at int64) int {
	if s, ok := l.partLog.(stager); ok {
		return s.Stage(field, first, at)
	}
	return 0
}

// StagedAppended is the log's, if it stages (stager).
func (l *servedPartLog) StagedAppended() int64 {
	if s, ok := l.partLog.(stager); ok {
		return s.StagedAppended()
	}
	return 0
}

func (l *servedPartLog) TruncateTo(offset int64) error {
	if offset >= l.LogEndOffset() {
		return l.partLog.TruncateTo(offset) // removes nothing
	}
	return l.c.truncate(l.tp, l.partLog, func() error { return l.partLog.TruncateTo(offset) })
}

func (l *servedPartLog) TruncateFullyAndStartAt(offset int64) error {
	return l.c.truncate(l.tp, l.partLog, func() error { return l.partLog.TruncateFullyAndStartAt(offset) })
}

func (l *servedPartLog) TruncateWithLost(t storage.Truncation) (lost storage.Lost, err error) {
	if !t.Full && t.Offset >= l.LogEndOffset() {
		return l.partLog.TruncateWithLost(t)
	}
	err = l.c.truncate(l.tp, l.partLog, func() (err error) {
		lost, err = l.partLog.TruncateWithLost(t)
		return err
	})
	return lost, err
}

// load records tp's served epoch store, read when its log was (re)opened;
// a store read again after a storage failure holds what the old one had
// made durable, which is all it had served.
func (c *catalog) load(tp wire.TopicPartition, se *storage.ServedEpoch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epochs == nil {
		c.epochs = map[wire.TopicPartition]*servedEpoch{}
	}
	if s := c.epochs[tp]; s != nil {
		s.store = se
		return
	}
	c.epochs[tp] = &servedEpoch{store: se}
}

// servedEpoch is one partition's served epoch state. Only the partition's
// owner changes it; the server reads held under catalog.mu.
type servedEpoch struct {
	store *storage.ServedEpoch
	// held: the partition is not served; a truncation is under way or
	// its epoch rise is not durable yet.
	held bool
	// bump: a truncation removed data and the served epoch has not risen
	// past the one served before it yet.
	bump bool
	// before is the served epoch when the truncation began: the rise is
	// to above it.
	before int32
}

// truncate runs a truncation of tp's log l with tp unserved, then raises
// the served epoch above the one served before (rise) and serves tp again.
// The log is truncated (or failed) before the new epoch is served, so a
// reader that sees the new epoch sees the truncated log; and it is not
// served in between, so no reader sees the truncated log under the old
// epoch.
func (c *catalog) truncate(tp wire.TopicPartition, l partLog, fn func() error) error {
	c.mu.Lock()
	s := c.epochs[tp]
	if s != nil {
		if !s.bump {
			s.bump, s.before = true, s.store.Epoch()
		}
		s.held = true
	}
	c.mu.Unlock()
	err := fn()
	if s != nil {
		c.rise(s, l, -1)
	}
	return err
}

// rise raises s to at least upstream and the log's latest epoch, and past
// the epoch served before a truncation if one is pending, then serves it
// again. A failed write keeps the partition held (after a truncation) or
// the old epoch served; the next publish tries again.
func (c *catalog) rise(s *servedEpoch, l partLog, upstream int32) error {
	if err := s.store.Raise(c.riseTarget(s, l, upstream)); err != nil {
		return err
	}
	c.mu.Lock()
	s.bump, s.held = false, false
	c.mu.Unlock()
	return nil
}

// riseAll makes the served epochs of ps that are due to rise durable
// side by side, a bounded number at a time, before the worker publishes
// them one by one (changed, which then finds nothing left to write). Each
// rise is a file written and fsynced in the partition's directory; after
// a leader move every partition of the broker rises at once, and one at a
// time they were most of the reconciliation of thousands of partitions.
// A rise that fails here is tried again, and logged, by changed.
func (m *Manager) riseAll(ps []*part) {
	type due struct {
		s        *servedEpoch
		l        partLog
		upstream int32
	}
	var todo []due
	m.catalog.mu.Lock()
	for _, p := range ps {
		if s := m.catalog.epochs[p.tp]; s != nil {
			todo = append(todo, due{s: s, l: p.log, upstream: reconciledEpoch(p, p.sm.Status().LeaderEpoch)})
		}
	}
	m.catalog.mu.Unlock()
	todo = slices.DeleteFunc(todo, func(d due) bool { return !m.catalog.dueToRise(d.s, d.l, d.upstream) })
	if len(todo) < 2 {
		return // changed does it
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallelRises)
	for _, d := range todo {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			rise := func() { _ = m.catalog.rise(d.s, d.l, d.upstream) }
			if m.aroundRise != nil {
				m.aroundRise(rise)
				return
			}
			rise()
		}()
	}
	wg.Wait()
}

// parallelRises bounds riseAll's writes in flight, as openParallel does
// the opens at start-up.
const parallelRises = 16

// dueToRise reports whether rise(s, l, upstream) would write.
func (c *catalog) dueToRise(s *servedEpoch, l partLog, upstream int32) bool {
	return c.riseTarget(s, l, upstream) > s.store.Epoch()
}

// riseTarget is the epoch rise raises s to: past a pending truncation's
// only, when nothing is served.
func (c *catalog) riseTarget(s *servedEpoch, l partLog, upstream int32) int32 {
	target := int32(-1)
	if !c.notServed {
		target = upstream
		if latest, ok := l.LatestEpoch(); ok {
			target = max(target, latest)
		}
	}
	c.mu.Lock()
	bump, before := s.bump, s.before
	c.mu.Unlock()
	if bump {
		target = max(target, before+1)
	}
	return target
}

// reconciledEpoch is leaderEpoch, the upstream epoch p's state machine
// follows, once it has reconciled with it and fetches at it; -1 while it
// reconciles, backs off or has no leader.
func reconciledEpoch(p *part, leaderEpoch int32) int32 {
	switch p.sm.State() {
	case follower.StateFetching, follower.StateOutOfRange:
		return leaderEpoch
	}
	return -1
}
