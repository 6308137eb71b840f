// Package follower is the per-partition state machine of kfollower: it decides
// what to ask the leader next and how far to truncate the local log, following
// KIP-101 and KIP-279 (iterative OffsetsForLeaderEpoch) and KIP-320 (fencing).
//
// It is pure and deterministic: no network, disk, clock, kgo or Prometheus.
// Replies and the current time come in as arguments; requests to send and
// storage actions to carry out come out, in order. The driver
// (follower/fetcher) performs them and confirms.
//
// May import: the standard library and franz-go's kerr (error codes) only.
// It declares the small read-only view of a local log it needs; storage
// satisfies it without either package importing the other.
package follower
