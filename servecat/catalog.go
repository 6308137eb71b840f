package servecat

import (
	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/wire/server"
)

// Catalog serves what the Manager has open. It is a server.Catalog and a
// groups.Catalog; every method is safe for concurrent use.
type Catalog struct{ M *fetcher.Manager }

// New is the Catalog of m.
func New(m *fetcher.Manager) Catalog { return Catalog{M: m} }

// Topics lists the followed topics whose upstream id is known.
func (c Catalog) Topics() []server.Topic {
	ts := c.M.CatalogTopics()
	out := make([]server.Topic, len(ts))
	for i, t := range ts {
		out[i] = server.Topic{Name: t.Name, ID: t.ID, Partitions: t.Partitions}
	}
	return out
}

// Partition is a partition's log and served epoch, ok false while it is
// not served (not open yet, truncating, stopped).
func (c Catalog) Partition(topic string, partition int32) (server.Log, int32, bool) {
	l, epoch, ok := c.M.CatalogPartition(topic, partition)
	if !ok {
		return nil, 0, false
	}
	// The served epoch is at least the latest upstream epoch followed;
	// the server raises it to the log's latest itself.
	return l, max(epoch, 0), true
}

// HighWatermark is what the server serves up to (groups.Catalog).
func (c Catalog) HighWatermark(topic string, partition int32) (int64, bool) {
	l, _, ok := c.M.CatalogPartition(topic, partition)
	if !ok {
		return 0, false
	}
	return l.DurableEnd(), true
}

// TopicName is the served topic of an upstream topic id (groups.Catalog).
func (c Catalog) TopicName(id [16]byte) (string, bool) {
	for _, t := range c.M.CatalogTopics() {
		if t.ID == id {
			return t.Name, true
		}
	}
	return "", false
}

var _ server.Catalog = Catalog{}
