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
	// EndOffsetForEpoch answers exactly as Kafka's
	// LeaderEpochFileCache.endOffsetFor(epoch, logEndOffset) does: (-1, -1)
	// for epoch -1, an empty cache or an epoch above the latest; (epoch, LEO)
	// for the latest epoch; otherwise the largest local epoch <= epoch (or
	// epoch itself when it is below the first) and the start offset of the
	// next higher local epoch.
	EndOffsetForEpoch(epoch int32) (found int32, end int64)
}
