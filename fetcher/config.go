package fetcher

import (
	"log/slog"
	"time"

	"github.com/kfollower/kfollower/follower"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config configures a Manager.
type Config struct {
	// Client carries Metadata and the per-broker requests. The caller owns
	// it (TLS, SASL, seeds) and closes it after Run returns.
	Client *kgo.Client
	// DataDir holds one directory per partition, laid out as Kafka's.
	DataDir string
	// Follow selects the topics to follow; it is asked about every topic
	// Metadata lists, so topics created later are picked up.
	Follow func(topic string) bool
	// Storage is the template for each partition's log options; TopicID
	// and Logger are filled in per partition.
	Storage storage.Options
	// DiscardOnGap mirrors Kafka when the leader's log start passed our log
	// end: drop what we hold instead of keeping it (follower.Config).
	DiscardOnGap bool
	// NoFetchSessions makes every Fetch full and sessionless (SessionEpoch
	// -1); by default each worker keeps a KIP-227 incremental fetch
	// session with its broker where the broker grants one
	// (wire.FetchSession).
	NoFetchSessions bool
	// DirectFetch, if set, has each worker send its Fetches on a
	// connection of its own to its broker (wire.FetchConn), which reads
	// every response into a buffer reused once its records are appended,
	// where franz-go allocates a zeroed one per response. Everything else
	// (Metadata, OffsetsForLeaderEpoch, ListOffsets) still goes through
	// Client. Nil: every Fetch goes through Client's connections, as it
	// must when the cluster needs SASL (FetchConn speaks none) or the
	// client dials in a way DirectFetch cannot mirror (direct.go).
	DirectFetch *DirectFetch
	// Limits bound each Fetch; zero means wire.DefaultFetchLimits.
	Limits wire.FetchLimits
	// MetadataInterval is how often leaders are refreshed; default 5 s.
	// Partitions ask for an early refresh when a leader moves.
	MetadataInterval time.Duration
	// Backoff bounds retries per partition; zero means follower.DefaultBackoff.
	Backoff follower.BackoffPolicy
	// Observers are told, one after the other, of every request, append,
	// event, reconciliation, leader change and maintenance run (metrics,
	// progress logs). None: nobody is told.
	Observers []Observer
	// MaintenanceInterval, if > 0, has each worker enforce local retention
	// (Storage.RetentionBytes/RetentionAge) that often, on the goroutine
	// that owns the logs, because a storage.Log has one writer; under
	// storage.FlushInterval the pass also finds a log the flusher's fsync
	// failed. The fsyncs themselves run on the flusher, every
	// Storage.FlushInterval, beside the workers (flusher.go).
	MaintenanceInterval time.Duration
	// Changed, if set, is called after anything a reader of tp's log may
	// see has changed: an append, a flush, a truncation, retention, a
	// hand-off, a new leader epoch, or the log stopped being served
	// (CatalogPartition). It runs on the log owner's goroutine, or on one
	// of the flusher's when a flush moved DurableEnd, so it must not block
	// (wire/server's Server.Notify does not).
	Changed func(tp wire.TopicPartition)
	// NotServed says no server reads the copy in this run (kfollower run
	// without --serve): the served leader epoch (served.go) is then only
	// raised past a truncation that removes data, which a reader of an
	// earlier serving run must be fenced by, and not to each upstream or
	// log epoch, so a leader move writes and fsyncs no file per
	// partition. The next open that serves raises it to the log's latest
	// epoch before anything is served. CatalogPartition serves nothing.
	NotServed bool
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

func (c *Config) withDefaults() {
	if c.Follow == nil {
		c.Follow = func(string) bool { return false }
	}
	if c.Limits == (wire.FetchLimits{}) {
		c.Limits = wire.DefaultFetchLimits
	}
	if c.MetadataInterval <= 0 {
		c.MetadataInterval = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// observe is what the driver tells its observers through.
func (c *Config) observe() observers { return c.Observers }
