package server

import (
	"github.com/kfollower/kfollower/authz"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorization, as KafkaApis checks it for each key served (Config.Authorizer;
// without one everything is allowed):
//
//   - Metadata: DESCRIBE on each topic. Asked for every topic, the answer
//     leaves out what the principal may not describe; asked by name, such
//     a topic is TOPIC_AUTHORIZATION_FAILED whether it exists or not (its
//     existence is not disclosed), with a zero topic id; asked by id, it
//     is TOPIC_AUTHORIZATION_FAILED with the id and a null name (topic ids
//     are not secret, handleTopicMetadataRequest). Authorized operations
//     (v8+) are the principal's READ and DESCRIBE, and DESCRIBE on the
//     cluster.
//   - Fetch: READ on the topic, checked after the topic id resolves
//     (UNKNOWN_TOPIC_ID first) and before the topic or partition is
//     looked up (handleFetchRequest).
//   - ListOffsets and OffsetForLeaderEpoch: DESCRIBE on the topic, before
//     anything else of the partition (handleListOffsetRequest,
//     handleOffsetForLeaderEpochRequest; KIP-320 let consumers use the
//     latter with DESCRIBE). READ implies DESCRIBE.
//   - ApiVersions, DescribeCluster, and the refused writes: none.
//
// A denial is counted and audited per topic and request.

// topicAuth remembers one request's answers per topic.
type topicAuth struct {
	cc   *conn
	op   authz.Operation
	seen map[string]bool
}

func (cc *conn) topicAuth(op authz.Operation) *topicAuth {
	return &topicAuth{cc: cc, op: op, seen: map[string]bool{}}
}

func (a *topicAuth) ok(topic string) bool {
	if a.cc.s.cfg.Authorizer == nil {
		return true
	}
	v, done := a.seen[topic]
	if !done {
		v = a.cc.authorized(a.op, authz.Topic, topic, false)
		a.seen[topic] = v
	}
	return v
}

// authorizeFetch makes every partition of a topic the principal may not
// READ TOPIC_AUTHORIZATION_FAILED; an unknown topic id stays
// UNKNOWN_TOPIC_ID.
func (cc *conn) authorizeFetch(parts []fetchPart) {
	a := cc.topicAuth(authz.Read)
	for i := range parts {
		p := &parts[i]
		if p.pre == kerr.UnknownTopicID || p.pre == kerr.TopicAuthorizationFailed || a.ok(p.topic) {
			continue
		}
		p.pre = kerr.TopicAuthorizationFailed
		p.resp.ErrorCode = p.pre.Code
	}
}

// authorizeListOffsets answers TOPIC_AUTHORIZATION_FAILED, timestamp,
// offset and epoch -1, for every partition of a topic the principal may
// not DESCRIBE, whatever else was found for it.
func (cc *conn) authorizeListOffsets(resp *kmsg.ListOffsetsResponse) {
	a := cc.topicAuth(authz.Describe)
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if a.ok(t.Topic) {
			continue
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.ErrorCode = kerr.TopicAuthorizationFailed.Code
			p.Timestamp, p.Offset, p.LeaderEpoch = -1, -1, -1
		}
	}
}

// authorizeOffsetForLeaderEpoch answers TOPIC_AUTHORIZATION_FAILED, epoch
// and end offset -1, for every partition of a topic the principal may not
// DESCRIBE.
func (cc *conn) authorizeOffsetForLeaderEpoch(resp *kmsg.OffsetForLeaderEpochResponse) {
	a := cc.topicAuth(authz.Describe)
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if a.ok(t.Topic) {
			continue
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.ErrorCode = kerr.TopicAuthorizationFailed.Code
			p.LeaderEpoch, p.EndOffset = -1, -1
		}
	}
}

// topicOperations is a topic's authorized operations (KIP-430 bits) for
// the principal: READ and DESCRIBE as granted.
func (cc *conn) topicOperations(topic string) int32 {
	if cc.s.cfg.Authorizer == nil {
		return aclRead | aclDescribe
	}
	var ops int32
	if cc.authorized(authz.Read, authz.Topic, topic, true) {
		ops |= aclRead
	}
	if cc.authorized(authz.Describe, authz.Topic, topic, true) {
		ops |= aclDescribe
	}
	return ops
}

// clusterOperations is the cluster's authorized operations: DESCRIBE, if
// granted.
func (cc *conn) clusterOperations() int32 {
	if cc.authorized(authz.Describe, authz.Cluster, authz.ClusterName, true) {
		return aclDescribe
	}
	return 0
}
