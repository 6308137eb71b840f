package storage

// Reader is the read side of one partition's log: what a reader that must
// not write (a Kafka protocol server, the audit tools) needs. The live *Log
// and the read-only *View both satisfy it, so such a reader works on
// either, and it can never append or truncate through it.
//
// Offsets are Kafka offsets; epochs are partition leader epochs.
type Reader interface {
	// Read returns whole batches starting with the one that holds offset
	// (or the first after it, across a compaction gap), at most maxBytes
	// of them but always at least one, all from one segment, as
	// LogSegment.read with minOneMessage. It returns nil at the log end,
	// an error wrapping ErrOffsetOutOfRange outside [LogStartOffset,
	// LogEndOffset], and a *CorruptionError for a batch that fails its
	// CRC: every batch returned has passed it.
	Read(offset int64, maxBytes int) ([]byte, error)
	// ReadSection is what a Fetch answer sends: whole batches from the one
	// that holds offset, none at or past end, as a Section of one segment
	// file, not read into memory and not CRC-checked (Kafka's
	// FileRecords.slice); see Log.ReadSection.
	ReadSection(offset int64, maxBytes int, end int64, minOne bool) (_ Section, next int64, _ error)
	// LogStartOffset is the first offset the log holds (or would hold).
	LogStartOffset() int64
	// LogEndOffset is the offset after the last stored batch.
	LogEndOffset() int64
	// DurableEnd is the end that survives a power loss: the log end at the
	// last fsync of the active segment (Kafka's UnifiedLog.recoveryPoint,
	// the offset up to which the log is flushed). The log holds only
	// committed data, so a server of this copy can give DurableEnd as its
	// high watermark. It never exceeds LogEndOffset.
	// Segments before the active one are always durable: a roll fsyncs the
	// sealed segment. Under each FlushPolicy:
	//
	//   - FlushEveryAppend: Append fsyncs before it returns, so after every
	//     successful call DurableEnd == LogEndOffset;
	//   - FlushInterval: the log end at the last fsync: the end a Flush
	//     took when it started (it fsyncs without blocking Append, so what
	//     was appended meanwhile waits for the next), a roll, a
	//     truncation, Open or Close; Append never fsyncs;
	//   - FlushOS: only a roll, a truncation, Open and Close fsync, so
	//     DurableEnd moves at those alone; what the OS writes back on its
	//     own in between cannot be known and does not count.
	//
	// After a failed write or fsync it stays at the last end known durable.
	// A *View knows only what the writer recorded in
	// kfollower-recovery-point (rewritten at most once a second when it
	// flushes), so its DurableEnd may lag the writer's.
	DurableEnd() int64
	// LatestEpoch is the newest leader epoch in the cache; ok is false when
	// the cache is empty.
	LatestEpoch() (epoch int32, ok bool)
	// EndOffsetForEpoch answers as Kafka's
	// LeaderEpochFileCache.endOffsetFor(epoch, LogEndOffset) does; see
	// Epochs.EndOffsetFor.
	EndOffsetForEpoch(epoch int32) (found int32, end int64)
	// Epochs is a snapshot of the leader-epoch cache.
	Epochs() Epochs
	// LastStableOffset is the offset a read_committed reader is served up
	// to (UnifiedLog.lastStableOffset with DurableEnd as the high
	// watermark): the first offset of the earliest transaction still open
	// at the log end or ended by a marker at or past DurableEnd, else
	// DurableEnd; never below LogStartOffset (when the log is not empty).
	LastStableOffset() int64
	// AbortedTransactions lists, from the .txnindex files, the aborted
	// transactions that may hold records in [from, to): those whose ABORT
	// marker is at or after from and whose first offset is before to, in
	// marker order, as UnifiedLog.collectAbortedTransactions gives a
	// FetchResponse. Never nil.
	AbortedTransactions(from, to int64) []AbortedTxn
}

var _ Reader = (*Log)(nil)
