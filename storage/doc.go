// Package storage keeps a followed partition on disk exactly as Kafka lays
// out its own: <topic>-<partition>/ directories with 20-digit base-offset
// .log segments holding the fetched record batches unchanged, .index,
// .timeindex and .txnindex files, leader-epoch-checkpoint and
// partition.metadata.
//
// May import: the standard library and wire/batch (the record-batch format).
// It never imports follower; *Log satisfies follower's read-only LocalLog
// view (LogStartOffset, LogEndOffset, LatestEpoch, EndOffsetForEpoch),
// which the fetcher's call to follower.NewPartition checks at compile time.
//
// There is one writer of the format, *Log (Open recovers, then one
// goroutine appends, truncates and deletes), and one reader besides it,
// *View (OpenReadOnly: never recovers, never writes, safe beside a running
// writer). Both satisfy Reader, the read side a reader that must not write
// is given: Read, ReadSection (what a Fetch answer sends: a section of a
// segment file, unchecked and not read into memory, section.go), the log
// start and end, DurableEnd, the epochs, and for read_committed readers
// LastStableOffset and AbortedTransactions (txn.go).
//
// # On-disk format
//
// This section is the format's contract (docs/storage-format.md explains
// it). Under <data-dir>/<topic>-<partition>/, as Kafka names a partition
// directory (LocalLog.logDirName):
//
//	00000000000000000000.log        record batches v2, byte for byte as fetched
//	00000000000000000000.index      8-byte entries: int32 offset-base, int32 position
//	00000000000000000000.timeindex  12-byte entries: int64 timestamp, int32 offset-base
//	00000000000000000000.txnindex   34-byte entries: int16 version 0, int64 producerId,
//	                                firstOffset, lastOffset, lastStableOffset (ABORT markers)
//	00000000000000000000.kfollower-txns  "0\n<n>\n<producerId> <firstOffset>\n" × n: the
//	                                transactions open at the segment's base (written once, first)
//	00000000000000004711.log ...    next segment; its name is its base offset
//	leader-epoch-checkpoint         "0\n<n>\n<epoch> <startOffset>\n" × n
//	partition.metadata              "version: 0\ntopic_id: <22-char base64url>" (no newline)
//	kfollower-recovery-point        "0\n<base> <position> <next> <offset entries> <time entries>
//	                                <maxTs> <maxTsOffset> <firstTs> <lastEpoch>\n" (one line)
//	kfollower-log-start-offset      "0\n1\n<offset>\n", only once DeleteBefore moved the start
//	kfollower-truncation-intent     "0\n<to|full> <offset>\n[lost <event>\n]", only while a truncation runs
//	kfollower-unreported-losses     "0\n<n>\n<event>\n" × n, only while a loss awaits MarkReported
//	<name>.tmp                      a small file being replaced; Open deletes a leftover one
//
// kfollower-recovery-point says how far the active segment (base offset
// <base>) is known durable: its first <position> bytes, ending before
// offset <next>, with the indexer's state at that byte (how many index and
// time-index entries cover them, the max timestamp so far and its offset,
// the segment's first timestamp, the last batch's epoch; -1 where there is
// none). It is Kafka's recovery-point-offset-checkpoint down to the byte:
// it is rewritten after an fsync of the active segment (by Flush or an
// Append under FlushEveryAppend at most once a second, and by Flush only
// if no roll or truncation came during its fsync (Flush writes it without
// the log's lock, and a truncation or Close that comes meanwhile writes
// its own after it; a roll's new segment is read as torn from its start
// whatever point names the old one); by a Flush with nothing
// new to fsync when it is behind the durable end and a second old, so a
// log that went quiet gets one at its end; always by a truncation, Close,
// and an Open of a log that holds batches), never before
// leader-epoch-checkpoint holds the epochs of the batches it covers, and
// Open re-reads only the bytes after it. A log opened empty keeps a point
// that names its segment's start, or gets one written without an fsync
// (by Open, or, for a new log, by its first fsync, which counts it as
// just written): a torn one reads as that start point, and such a point
// says the whole active segment is to be re-read as torn. A point for another
// segment (the active one rolled since), or past the file's end, is
// ignored; with an intent present it is not trusted at all.
//
// All integers in .log/.index/.timeindex/.txnindex are big-endian. A segment's base
// offset is at or below its first batch's base offset (max(first incoming
// offset, LEO) on roll, as Kafka gives a follower). Index entries follow
// LogSegment.recover's rule on every path: per batch, an entry (the batch's
// last offset, its position) when the batch starts more than
// index.interval.bytes (default 4096) after the previous entry, with a time
// entry (max timestamp so far, its offset) when that timestamp grew; when a
// segment is sealed (roll or Close) the time index gets the segment's max
// timestamp. Only a segment's .log is held open (as Kafka holds each
// segment's FileRecords channel): index entries are kept in memory and
// written to their files, through a descriptor opened for the write and
// closed after it, when the segment is fsynced (Flush, seal, truncation,
// Open, Close), never per append; so an active segment's index files lag
// its .log by the entries since its last fsync, and a recovery point only
// counts entries durable in them. Index files are never preallocated, so a sealed segment's
// files are what Kafka leaves after trimToValidSize, and each offset entry
// names the last offset of the batch at its position, which
// DumpLogSegments --verify-index-only checks. The .txnindex holds an
// entry per transaction an ABORT marker in the segment ends, with the last
// stable offset the leader computed on append (txn.go), created on demand
// as Kafka's TransactionIndex opens its file lazily (with its first entry,
// or empty at seal: every sealed segment has one); the active
// segment's is rebuilt by Open and after a truncation from its
// .kfollower-txns and batches, a sealed one's is fsynced at seal and
// trusted. The kfollower-* and .kfollower-txns files are
// ignored by Kafka's loader (LogLoader only acts on
// .log/.index/.timeindex/.txnindex/.snapshot and the transient
// .deleted/.cleaned/.swap suffixes). Kafka keeps the log start offset in
// the log dir's log-start-offset-checkpoint; ours is per partition.
//
// TruncateWithLost keeps the batches a truncation removes under
// <data-dir>/lost+found/<topic>-<partition>/<event>/, <event> being
// "<first>-<end>" (20-digit offsets: the first saved batch's base offset,
// the log end) or that with ".1", ".2", ... for a later loss of the same
// range: one or more Kafka segments (.log, .index, .timeindex, rolled
// where the log would roll) plus lost.json (topic, partition, cause, from
// = the first offset lost, firstOffset, lastOffset, endOffset, the
// truncation and leader epochs, batch, record and byte counts, per-epoch
// ranges, segments, savedAt). An event is written as <event>.tmp and
// renamed into place complete; readers skip every name IsLostEventName
// refuses. kfollower-unreported-losses lists the events whose truncation
// is durable and whose report the owner has not confirmed
// (UnreportedLosses, MarkReported).
//
// # Order of durable steps
//
// Small files (checkpoint, partition.metadata, recovery point, log start,
// intent, unreported losses, lost.json) are replaced atomically: write <name>.tmp, fsync it,
// close, rename over <name>, fsync the directory (Kafka's CheckpointFile);
// but leader-epoch-checkpoint rewritten by an Append, and partition.metadata
// and the first recovery point of a log opened empty: written and renamed,
// fsynced later or never (below).
//
// Stage (stage.go) writes batches read off a Fetch connection past the
// active segment's end, validated, the first batch's first 12 bytes held
// back so that a crash leaves a torn tail; the Append of the same bytes
// writes those 12 and otherwise goes as below.
//
// Append: validate the whole run (nothing is written on a violation);
// roll if due (seal the old segment: final time-index entry, write and
// fsync .log, .index, .timeindex, .txnindex; write the new segment's .kfollower-txns
// atomically; create the new files; fsync the directory); write the
// batches (their index entries stay in memory until the next fsync) and
// their .txnindex entries; if an epoch starts, rewrite
// leader-epoch-checkpoint (tmp file, rename) without an fsync; then, under
// FlushEveryAppend, fsync the checkpoint if an Append rewrote it (its
// data, the directory), the active segment, and rewrite the recovery
// point if the last one is a second old (under FlushInterval Flush does
// the same, its fsync of the segment without the lock: flush.go). The
// checkpoint is made durable so before every recovery point and seal,
// which cover its batches; Kafka's LeaderEpochFileCache.assign fsyncs it
// on append instead (CheckpointFile.write with sync; KAFKA-15046 moved
// only the truncations' writes to a background flush). A crash before
// that fsync leaves the old checkpoint, whose missing epochs recovery
// reads back from the active segment past the recovery point, as
// LogSegment.recover does, or a torn one (the rename durable, the data
// not: empty, or no final newline), which recovery rebuilds from the
// batches. DurableEnd
// (Reader) is the log end at the last fsync of the active segment.
//
// TruncateTo(x) and TruncateFullyAndStartAt(x): 0. (TruncateTo) fsync the
// active segment if it has unsynced bytes, so that everything before the
// cut is durable before the intent; 1. write the intent file; 2. delete
// the later segments (indexes before .log), cut the segment holding x at
// the first batch with an offset >= x, rebuild its indexes (and its
// .txnindex and the open transactions from its snapshot), fsync it and
// the directory, rewrite the recovery point (a full truncation instead
// deletes all segments, creates an empty one at x, writes the recovery
// point and the log start); 3. rewrite leader-epoch-checkpoint cut to the
// new end; 4. remove the intent and fsync the directory. Open redoes an
// intent it finds before anything else, so after a crash neither the
// truncated batches nor their epochs come back. If writing the intent
// fails it is removed again (it may be on disk: its rename done, the
// directory fsync failed); if that fails too, appends are refused
// (ErrTruncationPending) until a truncation call succeeds or the log is
// reopened, so nothing is appended that the next Open's redo would cut.
//
// TruncateWithLost(t), one crash-atomic unit: a. copy the batches the
// truncation removes into lost+found/<tp>/<event>.tmp/ (each segment
// sealed and fsynced, then lost.json atomically, then the parent
// directory fsynced); b. the intent, with "lost <event>"; c. rename
// <event>.tmp to <event> and fsync the parent; d. steps 0-3 above; e. add
// <event> to kfollower-unreported-losses (atomic); f. remove the intent.
// Open finishes c-f from the intent (the copy was durable before it) and
// deletes any other <event>.tmp, a save that never reached its intent
// while its batches are still in the log. So after any crash there is
// exactly one complete event per loss, and UnreportedLosses lists it until
// MarkReported: a loss is reported at least once, and a report repeated
// after a crash carries the same Lost.ID.
//
// Open of an empty log (no .log byte, no intent) fsyncs nothing: a crash
// can only take the empty log, which the next Open creates again. For a
// new one it writes partition.metadata without an fsync (tmp, rename) and
// no recovery point, then creates the segment's .log (its .index and
// .timeindex come with the settle below, as Kafka creates an index file
// on first use); reopening an empty
// log writes nothing (but partition.metadata, fsynced, when it gets a
// topic id it had none of and was settled before: Open tolerates a torn
// one only of a log never settled). Appends fsync nothing either; the log's first fsync
// (Flush, a roll, a truncation, DeleteBefore, Close with batches) settles
// it first: partition.metadata's data, the recovery point at the
// segment's start if there is none (unsynced), the active segment's
// .kfollower-txns (tmp fsynced, renamed), the checkpoint if an Append
// wrote it, a new log's empty .index and .timeindex, then the partition
// directory, the data directory and any
// other parent Open created. So no durable end is declared before the
// files and their directory entries are durable. A log whose only segment
// has no .kfollower-txns was never settled: nothing of it was declared
// durable, so Open re-reads it as torn from its start when its recovery
// point is missing or unreadable (a torn first batch is cut, never taken
// for corruption) and writes a torn partition.metadata again. The first
// recovery point is never synced (the next replaces it whole), so a torn
// point (a prefix of a segment's start point, any bytes of it zeroed:
// unsyncedPoint) is read as that one: the active segment torn from its
// start; other bytes are a garbled point. Settling counts as writing it,
// so the first fsync does not rewrite it; a Flush a second later does,
// even with nothing new to fsync (FlushDue).
// Close of an unsettled empty log fsyncs nothing.
//
// DeleteBefore(x): write the log start file, cut the epoch cache from the
// start and rewrite the checkpoint, then delete whole segments below x; a
// crash in between leaves segments that Open deletes.
//
// # Recovery
//
// Open validates the tail, not the whole log. Sealed segments are trusted
// through their indexes (sanity checks as OffsetIndex/TimeIndex.sanityCheck
// plus a header walk from the last entry that proves the index complete);
// a sealed segment whose indexes are missing or fail is re-read with CRC
// checks and its indexes rewritten. The active segment is re-read batch by
// batch with CRC checks. Outcomes (TestCorruption, TestFaults):
//
//   - torn or zero-filled tail of the active segment: cut at the last whole,
//     valid batch; the epoch cache is cut to the new end; a warning names
//     the bytes dropped. Safe for a follower: they are refetched. Past the
//     recovery point (nothing there was known durable, and a power loss
//     may tear and reorder unsynced writes) this holds even when a valid
//     batch follows the bad bytes, as LogSegment.recover cuts above its
//     recovery point.
//   - a bad batch with a valid batch right after it, in the active segment
//     before the recovery point or with no usable point, or any bad batch
//     in a sealed segment that has to be re-read: a *CorruptionError;
//     nothing is cut, the partition stops. The same while copying our own
//     batches to lost+found: no copy is left, the log is unchanged.
//   - a bad batch in a sealed segment is otherwise found by Read, which
//     checks the CRC of every batch it returns: *CorruptionError.
//     ReadSection does not (Kafka's broker sends what it stored unchecked;
//     clients check CRCs): the audit and verify tools read with Read.
//   - a torn recovery point, or a missing or unreadable one of a log never
//     settled: the active segment re-read as torn from its start (above).
//   - missing, unreadable, torn (empty, no final newline) or non-monotonic leader-epoch-checkpoint: rebuilt
//     from the batches' epochs with a warning; entries past the log end are
//     cut (LogLoader's truncateFromEnd) and the start is cut to the log
//     start.
//   - a truncation intent: finished, with its lost+found event put in place
//     and listed as unreported; an unreadable one, or one whose event is
//     gone: Open fails.
//   - leftover *.tmp files and indexes without a .log, and <event>.tmp
//     directories no intent names: deleted.
//   - a failed write or fsync while running: the call returns the error and
//     the Log refuses further calls until it is reopened (after a failed
//     fsync the page cache cannot be trusted); Open then repairs the files.
//
// A View repairs none of this: it reads the files as Open would see them
// (the torn tail left out, the epoch cache built the same way) without
// writing; see View.
//
// # Concurrency
//
// One goroutine writes; readers (Read, the offset and epoch queries) may
// run concurrently and see a consistent state under a read lock. Flush may
// run on another goroutine beside the writer: it holds the lock only to
// take the end to fsync and to record it, and records nothing if a roll or
// truncation came during its fsync (flush.go). Epochs is
// an immutable value, so a snapshot of the cache can be handed out freely.
// A View takes no lock of the writer's (none is shared across processes):
// it reads each segment no further than its size at open.
package storage
