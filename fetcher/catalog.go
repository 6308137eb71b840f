package fetcher

import (
	"sort"
	"sync"

	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
)

// CatalogTopic is one followed topic as a server of the copy lists it.
type CatalogTopic struct {
	Name string
	// ID is the upstream topic id, from Metadata.
	ID wire.TopicID
	// Partitions is the upstream partition count of the last Metadata.
	Partitions int32
}

// catalog is the read-only view of the logs the Manager holds, for a
// server of the copy (cmd/kfollower's --serve). It has a lock of its own:
// the logs' owners (Run, the workers) write it, any goroutine reads it.
//
// A log is registered when Run opens it and stays registered while its
// partition moves between Run and the workers: the *storage.Log is the same
// value wherever the part is, and its reads take its own read lock, safe
// beside its one writer (storage's package doc, Concurrency). It is
// dropped before Run closes it (a stop, a retired topic, shutdown); a read
// already under way then gets the closed log's error, never its bytes.
type catalog struct {
	mu     sync.Mutex
	topics map[string]CatalogTopic
	logs   map[wire.TopicPartition]storage.Reader
	// epochs are the served epochs (served.go), from the first open of a
	// partition's log until it is no longer served.
	epochs map[wire.TopicPartition]*servedEpoch
	// notServed is Config.NotServed: the served epochs rise only past
	// truncations, and CatalogPartition serves nothing.
	notServed bool
}

// topic records a followed topic from Metadata.
func (c *catalog) topic(name string, id wire.TopicID, partitions int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topics == nil {
		c.topics = map[string]CatalogTopic{}
	}
	c.topics[name] = CatalogTopic{Name: name, ID: id, Partitions: int32(partitions)}
}

// add serves l as tp's log, after Manager.serve loaded its served epoch. A
// log reopened after a storage failure replaces the old one.
func (c *catalog) add(tp wire.TopicPartition, l storage.Reader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.logs == nil {
		c.logs = map[wire.TopicPartition]storage.Reader{}
	}
	c.logs[tp] = l
}

// remove stops serving tp; its log is about to be closed. Its served epoch
// stays on disk, read again when the log is opened again.
func (c *catalog) remove(tp wire.TopicPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.logs, tp)
	delete(c.epochs, tp)
}

// retire stops listing topic: its partitions no longer follow it (it was
// recreated upstream under a new id).
func (c *catalog) retire(topic string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.topics, topic)
	for tp := range c.logs {
		if tp.Topic == topic {
			delete(c.logs, tp)
			delete(c.epochs, tp)
		}
	}
}

// clear stops serving everything; every log is about to be closed.
func (c *catalog) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.logs)
	clear(c.epochs)
}

// changed raises tp's served epoch by the rules of served.go (leaderEpoch,
// the upstream one, once reconciled with; the log's latest; past a
// truncation) and tells
// Config.Changed: called by p's owner after each step that may have
// changed what a reader of the log sees (appends, truncations, retention,
// flushes, hand-offs all end in publish). It reports false when the
// served epoch could not be made durable, to be tried again.
func (m *Manager) changed(p *part, leaderEpoch int32) (ok bool) {
	ok = true
	m.catalog.mu.Lock()
	s := m.catalog.epochs[p.tp]
	m.catalog.mu.Unlock()
	if s != nil {
		if err := m.catalog.rise(s, p.log, reconciledEpoch(p, leaderEpoch)); err != nil {
			// Served as before (or, after a truncation, not at all)
			// until a later publish makes it durable.
			m.cfg.Logger.Warn("persisting the served leader epoch failed; retrying", "partition", p.tp.String(), "err", err)
			ok = false
		}
	}
	if m.cfg.Changed != nil {
		m.cfg.Changed(p.tp)
	}
	return ok
}

// CatalogTopics lists the followed topics whose upstream id is known, by
// name. Safe to call from any goroutine.
func (m *Manager) CatalogTopics() []CatalogTopic {
	m.catalog.mu.Lock()
	out := make([]CatalogTopic, 0, len(m.catalog.topics))
	for _, t := range m.catalog.topics {
		out = append(out, t)
	}
	m.catalog.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// CatalogPartition is tp's log, read-only, and its served leader epoch
// (served.go: persisted, at least 0, the log's latest epoch and the
// upstream epoch reconciled with, raised by every truncation); ok is false
// while the partition has no open log (not yet opened, failed, stopped, or
// the Manager has shut down), while it truncates, and always under
// Config.NotServed, whose served epochs lag. Safe to call from any
// goroutine; the Reader's methods are safe beside the log's writer.
func (m *Manager) CatalogPartition(topic string, partition int32) (log storage.Reader, servedEpoch int32, ok bool) {
	tp := wire.TopicPartition{Topic: topic, Partition: partition}
	m.catalog.mu.Lock()
	defer m.catalog.mu.Unlock()
	l, e := m.catalog.logs[tp], m.catalog.epochs[tp]
	if l == nil || e == nil || e.held || m.catalog.notServed {
		return nil, -1, false
	}
	return l, e.store.Epoch(), true
}

// unserve stops serving tp, before its log is closed, and says so.
func (m *Manager) unserve(tp wire.TopicPartition) {
	m.catalog.remove(tp)
	if m.cfg.Changed != nil {
		m.cfg.Changed(tp)
	}
}
