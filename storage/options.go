package storage

import (
	"log/slog"
	"math"
	"time"
)

// FlushPolicy says when appended bytes are fsynced, and so how far
// DurableEnd trails LogEndOffset (Reader.DurableEnd).
type FlushPolicy int

const (
	// FlushEveryAppend fsyncs the active segment before Append returns.
	FlushEveryAppend FlushPolicy = iota
	// FlushInterval leaves the fsyncs to the owner's Flush, which may run
	// on a goroutine of its own beside the writer (fetcher's flusher calls
	// it every FlushInterval), so Append never waits on one; roll,
	// truncation and Close fsync too.
	FlushInterval
	// FlushOS leaves it to the OS, as Kafka does by default
	// (flush.messages = Long.MAX_VALUE); only roll, truncation and Close
	// fsync. A follower can refetch what a power loss takes.
	FlushOS
)

// Options configure a Log. Zero values take Kafka's defaults where Kafka
// has one.
type Options struct {
	// SegmentBytes rolls the active segment before it would grow past this
	// size (segment.bytes, default 1 GiB; at most math.MaxInt32 because
	// index positions are int32).
	SegmentBytes int64
	// SegmentAge rolls a non-empty segment whose first batch is older than
	// this, measured in batch timestamps as LogSegment.timeWaitedForRoll
	// does (segment.ms, default 7 days).
	SegmentAge time.Duration
	// IndexIntervalBytes is the byte distance between index entries
	// (index.interval.bytes, default 4096).
	IndexIntervalBytes int
	// RetentionBytes: EnforceRetention deletes the oldest sealed segments
	// while the log minus that segment stays at or above it. <= 0: no limit
	// (retention.bytes default -1).
	RetentionBytes int64
	// RetentionAge: EnforceRetention deletes sealed segments whose largest
	// timestamp is older than this. <= 0: no limit.
	RetentionAge time.Duration
	// Flush: see FlushPolicy. FlushInterval is how often the owner calls
	// Flush under FlushInterval; storage itself does not read it.
	Flush         FlushPolicy
	FlushInterval time.Duration
	// TopicID, when not zero, is written to partition.metadata, or checked
	// against it.
	TopicID TopicID
	// Logger receives warnings about repairs (torn tail cut, checkpoint
	// rebuilt). Default slog.Default().
	Logger *slog.Logger
	// Now is the clock for segment age, flush interval and retention.
	Now func() time.Time
	// OnSync, if set, is told how long each fsync took (segments,
	// indexes, checkpoints, directories), for a latency histogram. It is
	// called on the goroutine that fsyncs (the writer's, or Flush's) and
	// must not block.
	OnSync func(time.Duration)
}

func (o Options) withDefaults() Options {
	if o.SegmentBytes <= 0 || o.SegmentBytes > math.MaxInt32 {
		o.SegmentBytes = 1 << 30
	}
	if o.SegmentAge <= 0 {
		o.SegmentAge = 7 * 24 * time.Hour
	}
	if o.IndexIntervalBytes <= 0 {
		o.IndexIntervalBytes = 4096
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}
