// Package audit holds kfollower's read-only validation tools, so an
// operator can prove what the cluster did to a followed partition:
//
//   - Verify compares the local copy of each partition with the current
//     leader, batch by batch (base offset, last offset, partition leader
//     epoch, CRC), and checks that the local leader-epoch sequence is a
//     prefix of the leader's (docs/design.md promise 1).
//   - Lineage reconstructs the leader's leader-epoch sequence from the
//     outside with a walk of OffsetsForLeaderEpoch queries (KIP-101,
//     KIP-279) and sets it beside the local one.
//
// Each tool is a function taking an Options struct and returning a report
// with a JSON form (its exported fields), a table renderer (WriteTable) and
// an ExitCode, so cmd/kfollower only parses flags and prints. Exit codes
// are the same for every tool: ExitOK (0) when everything matches,
// ExitMismatch (1) when a divergence was found, ExitError (2) for usage or
// connection errors (an error returned by a tool maps to 2 through
// ExitCodeFor).
//
// audit never writes, by construction: it sends only package cluster's
// requests (it does not import kmsg), and the tool that writes to a
// cluster, lost replay, is package lostfound; the repository's layers test
// holds audit to that. It never writes the data dir either. Verify and
// Lineage read it through storage.OpenReadOnly, which never recovers or
// writes (storage.Open would: cut a torn tail, finish a truncation, the
// writer's job), so they work on the data dir of a running daemon,
// concurrently with its writer, or of a stopped one. A read is a snapshot:
// Verify takes each local log end before it asks the leaders anything and
// compares nothing past it; the view opens the segment files together (a
// segment the daemon deletes afterwards stays readable) and leaves out a
// batch being appended. A daemon that truncates during the run (a
// reconciliation) can make Verify report the state before the truncation;
// run it again.
//
// Requests are sent as a consumer, built by package wire as the fetcher's
// are: replica id -1 on Fetch (only committed data, docs/kafka.md §1.2)
// and on OffsetForLeaderEpoch (the broker ignores it there, docs/kafka.md
// §3.3; kmsg's default would be -2, the debug id).
//
// May import: storage, cluster, wire, wire/batch and franz-go (kgo, kerr),
// plus the standard library.
package audit
