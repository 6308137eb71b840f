// Package probe is an active leader-epoch conformance suite: it asks a
// partition's leader the questions whose answers Kafka's rules fix, on
// purpose, and says check by check whether the answers are right. It is
// for Kafka operators after an upgrade and for developers of
// Kafka-compatible brokers; the follower's conformance checks
// (follower/conformance.go) only judge the answers they happen to get.
//
// The checks, per partition, each citing its rule (Rules) and reporting
// pass, fail or not applicable with the evidence (request, answer,
// expected):
//
//  1. lineage_matches_data: walk OffsetsForLeaderEpoch down from the
//     current epoch (as `kfollower lineage` does), then fetch the batch at
//     each epoch's start and the one before it; their partition leader
//     epochs must be those the walk gives their offsets.
//  2. epochs_between_entries: epochs the partition never had answer with
//     the largest known epoch below and its end (KIP-279), below the first
//     entry with (asked, first start) (KAFKA-7415), above the current
//     epoch with (-1, -1).
//  3. leader_epoch_fencing: Fetch, ListOffsets and OffsetsForLeaderEpoch
//     with a stale CurrentLeaderEpoch get FENCED_LEADER_EPOCH, with a
//     future one UNKNOWN_LEADER_EPOCH (KIP-320).
//  4. diverging_epoch: a Fetch with a LastFetchedEpoch/offset pair the
//     leader lacks gets DivergingEpoch = endOffsetFor(epoch) and no
//     records; a pair it has gets none.
//  5. offsets_and_watermarks: log start ≤ LSO ≤ high watermark ≤ log end,
//     the high watermark never lower than at the read before within the
//     epoch, the leader's Metadata epoch at least the lineage's newest, no
//     batch above it.
//
// The expectations come from a model of the leader's epoch cache built by
// the walk (lineage.endOffsetFor is LeaderEpochFileCache.endOffsetFor), so
// the checks test the broker's answers against each other and against its
// data, not against a second source.
//
// Run is read-only: it sends Metadata, ApiVersions, ListOffsets,
// OffsetsForLeaderEpoch and Fetch as a consumer (replica id -1; ListOffsets
// LATEST with -2 for the log end), every one of the last three built by
// package wire's builders, fenced with the epoch Metadata named, to the
// leader. A probe during which the leadership changed is discarded and run
// again. Failover (--scenario failover) is the one writer: it creates,
// uses and deletes its own scratch topic, and moves its leadership.
//
// Every request goes through the Cluster interface, so the unit tests put
// a crafted broker behind it; KgoCluster adapts a kgo client.
//
// Metadata is read, partitions selected and retries spaced by package
// cluster, as for the audit tools.
//
// May import: cluster, wire, wire/batch and franz-go (kgo, kmsg, kerr,
// kadm), plus the standard library.
package probe
