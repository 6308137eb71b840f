// Package follower is the per-partition state machine of kfollower: it decides
// what to ask the leader next and how far to truncate the local log, following
// KIP-101 and KIP-279 (iterative OffsetsForLeaderEpoch) and KIP-320 (fencing).
//
// It is pure and deterministic: no network, disk, clock, kgo or Prometheus.
// Replies and the current time come in as arguments; requests to send and
// storage actions to carry out come out, in order. The driver
// (fetcher) performs them and confirms.
//
// May import: the standard library and franz-go's kerr (error codes) only.
// It declares the small read-only view of a local log it needs; storage
// satisfies it without either package importing the other.
//
// # The loop
//
// A Partition is driven the way etcd-io/raft's RawNode is: Step feeds an
// input in, Ready hands out the work, Advance confirms it.
//
//	p := follower.NewPartition(cfg, log) // log: the partition's storage.Log
//	p.Step(now, follower.LeaderChange{Leader: id, LeaderEpoch: epoch})
//	for p.HasReady() {
//		rd := p.Ready()
//		// 1. rd.Actions, in order, each durable before the next.
//		// 2. rd.Events: fill in Records and Bytes, log, count.
//		//    A ReconciledEvent says fetching resumes after a
//		//    reconciliation, with its round trips.
//		// 3. rd.Request: send it (batched per broker).
//		// 4. rd.RefreshMetadata: ask for Metadata soon.
//		p.Advance(rd)
//	}
//	// Later: p.Step(now, follower.EpochReply{...}) or FetchReply,
//	// OffsetsReply, RequestFailed; p.Step(now, follower.Tick{}) once
//	// now >= p.NextWake(); then the Ready loop again.
//
// The driver's duties:
//
//  1. Carry out a Ready's Actions in order. MoveToLostFound copies the batches
//     of a range to lost+found and must be durable before the TruncateTo or
//     TruncateFullyAndStartAt after it runs, so that nothing is silently lost
//     (docs/design.md promise 2). A truncation must be durable, intent,
//     segments and epoch checkpoint, before Advance: the next request is built
//     from the log as it then is, and a Ready never carries both Actions and a
//     Request.
//  2. Append carries the record batches of a Fetch reply back: append them
//     unchanged (validated, trailing partial batch dropped, epochs assigned).
//     It names the leader epoch the Fetch was fenced with, against which
//     the batches' own epochs are checked (CheckBatchEpochAboveLeader).
//     If an action fails, do not call Advance; step ActionFailed instead
//     (Corrupt for a batch that fails validation, Transient for a storage
//     failure that may clear on its own, such as a full disk).
//  3. Send the Request to Request's Leader and step its reply with the same
//     ID. A reply whose ID is not the one in flight is stale and Step
//     returns ErrStale; discard it. Replies for several partitions of one
//     broker are stepped one partition at a time.
//  4. Do not call Step between Ready and Advance.
//  5. Step Tick when NextWake has passed (after a backoff). In
//     StateStorageBackoff, first make the log usable again (reopen it); if
//     that fails, step ActionFailed{Transient} instead, which waits longer.
//  6. Before sending a broker an OffsetsForLeaderEpoch request, step
//     EpochRound{Leader: broker} into its other partitions that
//     JoinsEpochRound (they wait for the same broker's take-over), so that
//     one request per broker carries each round.
//
// # Protocol decisions
//
// Reconciliation (KIP-101, KIP-279) runs on start and on every new leader
// epoch, before the first Fetch: OffsetsForLeaderEpoch with our latest epoch;
// the answer goes through Decide, a port of Kafka's
// AbstractFetcherThread.getOffsetTruncationState (docs/kafka.md §4.4). When
// the leader names an epoch we lack, the loop asks again about our largest
// smaller epoch; the truncation is decided per round but carried out once, at
// the end, so a multi-round reconciliation is one cut, one lost+found range
// and one TruncationEvent. Every reconciliation ends with a ReconciledEvent,
// cut or not.
//
// Fetches carry LastFetchedEpoch, so a divergence the reconciliation did not
// see comes back as DivergingEpoch (KIP-595's truncate-on-fetch,
// docs/kafka.md §5) and goes through the same Decide.
//
// kfollower fetches as a consumer (replica id -1) and so only holds data that
// was committed. Two consequences shape the decisions: any truncation below
// our log end is committed data the cluster lost, reported as a
// TruncationEvent; and a leader answer of (-1, -1), "no information", never
// truncates (Kafka truncates to its high watermark there), see Decide.
//
// OFFSET_OUT_OF_RANGE asks ListOffsets for the leader's log start and end (as
// AbstractFetcherThread.fetchOffsetAndTruncate does, docs/kafka.md §7.1):
// below the leader's log start we keep our history, report a GapEvent and
// continue from the leader's log start (Config.DiscardOnGap does as Kafka
// does); past the leader's end we reconcile by epochs again, and fall back to
// the leader's end only when the epochs give no information.
//
// Errors go through Classify: FENCED_LEADER_EPOCH stops requests until newer
// metadata (KIP-320); everything else backs off, bounded and exponential, and
// retries, asking for metadata when the leader may have moved.
package follower
