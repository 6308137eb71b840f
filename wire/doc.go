// Package wire speaks Kafka's request layer for kfollower: it builds the
// kmsg requests a follower sends (Fetch, OffsetsForLeaderEpoch, ListOffsets)
// from small request structs of its own and reads the responses back into
// small answer structs, so the replica id, isolation level and session
// policy are decided in one file, requests.go, for the fetcher and audit
// alike; session.go keeps a broker's KIP-227 incremental fetch session
// (FetchSession); fetchconn.go is a broker connection for Fetch alone
// (FetchConn) that reads each response into a buffer it reuses once the
// caller releases it, where franz-go allocates a zeroed one per response,
// and can show a RecordsSink each partition's batches while the response
// is still being read (FetchStreaming, fetchstream.go). A Fetch answer's record batches are framed once, in requests.go:
// a partial last batch is dropped and records are counted from the
// headers. The record-batch v2 format itself lives in the pure subpackage
// wire/batch, shared with storage.
//
// May import: the standard library, kmsg, kerr and wire/batch; never
// follower (the fetcher maps follower's requests to and from these).
package wire
