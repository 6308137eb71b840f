package follower

// LocalLog is the read-only view of a partition's local log that the state
// machine needs. storage.Log satisfies it without importing this package.
//
// Offsets are Kafka offsets; epochs are partition leader epochs.
type LocalLog interface {
	// LogStartOffset is the first offset the local log holds.
	LogStartOffset() int64
	// LogEndOffset is one past the last offset the local log holds.
	LogEndOffset() int64
	// LatestEpoch is the largest epoch in the local leader-epoch cache;
	// ok is false when the cache is empty.
	LatestEpoch() (epoch int32, ok bool)
	// EndOffsetForEpoch answers as Kafka's LeaderEpochFileCache.endOffsetFor
	// does (kafka-internals.md §2.1): the largest local epoch <= epoch and the
	// offset where it ends (the start of the next epoch, or the log end for
	// the latest). found is -1 and end is -1 when no such epoch exists.
	EndOffsetForEpoch(epoch int32) (found int32, end int64)
}
