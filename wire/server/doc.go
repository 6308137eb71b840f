// Package server is a read-only Kafka broker over kfollower's local copy:
// framing, request headers, one goroutine per connection, and one file per
// API key (NN_name.go, as franz-go's kfake lays them out), each opening
// with the Kafka class that implements that key broker-side, the versions
// served and what is left out.
//
// kfollower appears as a one-broker cluster (Config.NodeID at the
// advertised address) that leads every partition the Catalog serves, under
// the upstream topic ids, with the served leader epoch the Catalog gives.
//
// May import: the standard library (no file system, no reflection: the
// layers test denies os, io/fs, syscall, reflect and unsafe), kmsg, kerr,
// wire/batch and authz. It never imports storage: it declares the read-only Log
// it needs, which *storage.Log and *storage.View satisfy, and a Log has no
// method that appends, truncates or deletes (TestLogIsReadOnly), so the
// server cannot change the data it serves.
//
// # Sending records
//
// A Fetch answer's records are not read into the server: Log.ReadSection
// gives sections of the segment files, and the answer is written as the
// bytes this package encodes (fetch_frame.go, byte for byte kmsg's
// encoding) with writev, and each section by its Send, which is
// sendfile(2) on a plain TCP connection and a copy through a pooled
// buffer on TLS, as Kafka's broker sends FileRecords (FileRecords.writeTo,
// no CRC check on the way out). A truncation that begins while a section
// is sent makes it Stale: the answer's last byte is held back until every
// section is seen unchanged, and the connection is closed otherwise, so no
// client gets a whole answer with changed bytes.
//
// # What it answers
//
// ApiVersions, Metadata, DescribeCluster, Fetch, ListOffsets and
// OffsetForLeaderEpoch, from Kafka 4.x's oldest versions (KIP-896) to the
// newest kmsg encodes. Produce, InitProducerId and FindCoordinator are
// advertised and refused, as Kafka refuses a principal that holds only
// READ and DESCRIBE (librdkafka turns features on from the advertised
// ranges, KAFKA-18659). With Config.Groups, FindCoordinator names this
// broker for consumer groups and the group APIs (JoinGroup to
// ListGroups, KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe)
// are forwarded to the upstream cluster through it (groups.go). Any other key, a version outside the advertised
// range (ApiVersions excepted: it gets UNSUPPORTED_VERSION in a v0 body),
// a frame above Config.MaxRequestBytes or a request that does not parse
// closes that connection, as Kafka's SocketServer does; no other
// connection notices.
//
// # Security
//
// As a Kafka listener: Config.TLS makes it SSL (mutual TLS with client
// certificates required, the certificate naming the principal through
// Config.CertPrincipal), Config.SASL makes it SASL_PLAINTEXT or SASL_SSL
// (SaslHandshake v0-1, SaslAuthenticate v0-2, KIP-152; before
// authentication only ApiVersions and the SASL keys are taken, each at
// most Config.MaxAuthBytes; a failure is SASL_AUTHENTICATION_FAILED with
// Kafka's message, then the connection closes). Config.Authorizer decides
// what each principal may describe and read, with KafkaApis' checks per
// key (authorize.go). Authentications and denials are audit lines, at a
// bounded rate (auditLog), and go to Config.Observer.
//
// # Limits
//
// Config.MaxConnections and MaxConnectionsPerIP close a connection above
// them as it is accepted; a request's size is capped (MaxRequestBytes, or
// MaxAuthBytes before authentication) and read into a buffer that grows
// only as bytes arrive and is dropped after a large request; one answer
// is in memory at a time, capped by FetchMaxBytes; a connection idle, or
// slow to send a request or to finish the TLS handshake, for IdleTimeout
// is closed. Each closing for bad input is counted by reason (Observer).
//
// # Offsets and epochs
//
// The high watermark is the log's DurableEnd: everything the copy holds is
// committed upstream, and DurableEnd is what survives a crash, so nothing
// served can be taken back by a restart (docs/design.md §11). The served
// epoch is never below the log's latest epoch; OffsetForLeaderEpoch, and
// the DivergingEpoch check of Fetch, answer over the log's epoch cache
// plus the entry (served epoch, log end) that Partition.makeLeader would
// have added, so a downstream reader that holds an epoch this copy lost
// learns where its log diverges (KIP-320, KIP-279; docs/kafka.md §2.6,
// §3.1, §5.1).
//
// # Long polls
//
// A Fetch that has less than MinBytes waits up to MaxWait, woken by
// Server.Notify, which the owner of the logs calls whenever what a
// partition serves may have changed (DurableEnd moved, a truncation,
// retention, a new served epoch). A missed Notify costs latency, never
// correctness: the wait ends at MaxWait and the partition is read again.
//
// # Not yet
//
// ListOffsets by timestamp and
// max timestamp scan the batches from the log start (a Log has no time
// index). No fetch sessions, SASL re-authentication (KIP-368),
// OAUTHBEARER or GSSAPI.
//
// # Concurrency
//
// Serve runs one goroutine per connection and returns once all of them
// have ended. Requests on one connection are answered one at a time, in
// order (Kafka mutes a channel while a request is in flight). The Catalog
// and every Log are called from many connection goroutines at once.
package server
