// Package groups forwards the consumer-group APIs that kfollower's served
// endpoint (wire/server) receives to the upstream cluster, which keeps
// the groups: record data comes from the local copy, group coordination
// and committed offsets stay in the cluster. Offsets, leader epochs and
// topic ids are the cluster's, so a group moves between the cluster and
// kfollower with no translation.
//
// A Forwarder is the server.Groups of wire/server's Config:
//
//   - FindCoordinator for a group names kfollower itself once the
//     upstream has a coordinator for it (found with FindCoordinator
//     upstream and cached); the group's requests then go to that upstream
//     coordinator and the answers come back unchanged, as Kafka protocol
//     proxies (Kroxylicious, kafka-proxy) forward them. NOT_COORDINATOR,
//     COORDINATOR_NOT_AVAILABLE or a lost connection forget the cached
//     coordinator, and the client, told so, finds it again.
//   - A request goes upstream at the version the client chose: ApiVersions
//     advertises only the versions both kmsg and the upstream brokers
//     take (asked at start and whenever a broker connection is made), so
//     no request or answer is ever translated.
//   - Each client connection gets upstream connections of its own (a
//     kgo.Client per session, made on the first group request): a JoinGroup
//     or SyncGroup the coordinator holds until the rebalance completes then
//     delays no other member, and one connection's requests reach the
//     coordinator in the order the client sent them.
//   - DescribeGroups, ConsumerGroupDescribe and OffsetFetch v8+ name
//     several groups, which may have different coordinators: each
//     coordinator gets its groups and the answers are merged. ListGroups
//     goes to every upstream broker.
//   - An upstream that cannot be reached answers each group request with
//     COORDINATOR_NOT_AVAILABLE (retriable) and a message, is logged at
//     most once a RateLimit, and is counted (Observer); assign-mode reads
//     are unaffected: they never come here.
//   - An OffsetCommit above the served high watermark is forwarded
//     unchanged (the cluster owns group state) and counted.
//
// The upstream sees kfollower's own client id and credentials: group
// operations need kfollower's principal to hold READ on the groups (and
// DESCRIBE for ListGroups and DescribeGroups).
//
// May import: the standard library, wire/server (for the interfaces it
// implements), kgo, kmsg and kerr.
package groups
