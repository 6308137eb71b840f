// Package cluster asks a Kafka cluster, from outside and one request at a
// time, the few questions kfollower's tools need: Metadata (LoadMetadata,
// or MetadataRequest and MetadataOf for a caller that sends it its own
// way; Lookup and SelectPartitions read the answer), one Fetch of one
// partition from its leader (Fetch, ChunkOf), and, batched one request per
// leader broker and sent concurrently, OffsetsForLeaderEpoch
// (OffsetsForLeaderEpoch) and the log start offsets (LogStartOffsets).
//
// The requests are built by package wire, the same builders the fetcher
// uses, so replica id -1 (a consumer: only committed data,
// docs/kafka.md §1.2), read_uncommitted and sessionless fetches are decided
// in one file for the daemon and the tools alike. Every request here reads:
// nothing in this package writes to a cluster (lostfound's replay produces
// through a kgo producer of its own).
//
// The daemon does not use this package: its fetcher keeps long-lived,
// pipelined requests per broker. Here each call is one round trip, and the
// caller decides what to retry (wire.RetryAfterMetadata), waiting Backoff
// before it asks Metadata again.
//
// May import: wire, wire/batch and franz-go (kgo, kmsg, kerr), plus the
// standard library.
package cluster
