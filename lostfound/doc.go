// Package lostfound holds the tools for what a truncation kept: List reads
// the lost+found events storage saved before cutting committed data away
// (storage's TruncateWithLost: the batches as Kafka segments plus
// lost.json; docs/design.md promise 2), and Replay produces their records
// again to a topic: by default only those of cluster loss (lost.json's
// cause, storage.Lost.ClusterLoss), and never the records of the first
// saved batch below lost.json's from, which the leader still has.
//
// It is apart from audit because Replay writes to a cluster, which audit's
// tools never do, and a writer has safety properties of its own:
//
//   - idempotent across runs: every record carries SourceHeader naming the
//     lost record (its batch's leader epoch and its offset: two losses at
//     the same offsets are different records), and Replay reads the whole
//     target first and skips what is already there, so a replay run again,
//     or after an interruption, adds nothing (two replays to one topic must
//     not run at the same time);
//   - idempotent within a run: a producer with acks=all and kgo's
//     idempotence, so a retry neither duplicates nor reorders a partition;
//   - transactions as the lost range shows them: records of an aborted
//     transaction are never replayed, those of a transaction whose commit
//     or abort marker is not in the range only when asked
//     (ReplayOptions.IncludeUndecided), and control records never.
//
// The data dir is only read (storage.ReadLost, storage.ParsePartitionDir),
// so both tools may run beside a running daemon; a save the daemon has not
// finished (<event>.tmp, any name storage.IsLostEventName refuses) is left
// out.
//
// Like audit's tools, each takes an options struct and returns a report with
// a JSON form (its exported fields), WriteTable and ExitCode (always 0: a
// failure is the error instead), so cmd/kfollower only parses flags and
// prints.
//
// May import: storage, cluster, wire and franz-go (kgo, kmsg, kerr), plus the
// standard library.
package lostfound
