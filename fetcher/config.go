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
	// Limits bound each Fetch; zero means wire.DefaultFetchLimits.
	Limits wire.FetchLimits
	// MetadataInterval is how often leaders are refreshed; default 5 s.
	// Partitions ask for an early refresh when a leader moves.
	MetadataInterval time.Duration
	// Backoff bounds retries per partition; zero means follower.DefaultBackoff.
	Backoff follower.BackoffPolicy
	// OnEvent receives every truncation and gap event, with Records and
	// Bytes filled in, after its storage actions are durable. It is called
	// from fetcher goroutines and must not block for long.
	OnEvent func(follower.Event)
	// OnFetch, if set, is told of every Fetch round trip (for metrics).
	OnFetch func(FetchStats)
	// OnLeaderChange, if set, is told when metadata names another leader or
	// leader epoch for a partition already followed (for metrics).
	OnLeaderChange func(tp wire.TopicPartition, old, new follower.LeaderChange)
	// OnReconciled, if set, is told when a partition fetches again after
	// reconciling, with the OffsetsForLeaderEpoch answers it took (KIP-279
	// roundtrips, for metrics).
	OnReconciled func(tp wire.TopicPartition, roundtrips int)
	// MaintenanceInterval, if > 0, has each worker enforce local retention
	// (Storage.RetentionBytes/RetentionAge) and, under storage.FlushInterval,
	// flush its logs that often. Both run on the goroutine that owns the
	// logs, because a storage.Log has one writer.
	MaintenanceInterval time.Duration
	// OnMaintenance, if set, is told of each partition's retention and
	// flush work (for metrics).
	OnMaintenance func(MaintenanceStats)
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// FetchStats describes one Fetch or OffsetsForLeaderEpoch round trip to a broker.
type FetchStats struct {
	Broker     int32
	Kind       string // "fetch", "offsets_for_leader_epoch" or "list_offsets"
	Partitions int
	Latency    time.Duration
	Err        error // transport error, nil on a reply
	Bytes      int64 // record bytes appended from a fetch
	Records    int64 // records appended from a fetch
	// FetchedBytes and FetchedRecords count the record batches a Fetch
	// reply carried (records from the batch headers, nothing decompressed).
	FetchedBytes, FetchedRecords int64
	// Results counts an OffsetsForLeaderEpoch reply's partitions by result:
	// "ok", "undefined" (the leader has no end offset for the epoch) or a
	// Kafka error name such as FENCED_LEADER_EPOCH; for a Fetch, the
	// partitions that answered with an error, by error name.
	Results map[string]int
	// Stale counts the partitions whose answer was dropped: handed off
	// while the request was in the air, or no longer the request in flight
	// for the state machine (follower.ErrStale).
	Stale int
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
	if c.OnEvent == nil {
		c.OnEvent = func(follower.Event) {}
	}
	if c.OnFetch == nil {
		c.OnFetch = func(FetchStats) {}
	}
	if c.OnLeaderChange == nil {
		c.OnLeaderChange = func(wire.TopicPartition, follower.LeaderChange, follower.LeaderChange) {}
	}
	if c.OnReconciled == nil {
		c.OnReconciled = func(wire.TopicPartition, int) {}
	}
	if c.OnMaintenance == nil {
		c.OnMaintenance = func(MaintenanceStats) {}
	}
}
