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
// The consumer-group APIs (groups.go) are checked here before anything is
// forwarded, so the upstream, which sees kfollower's own principal, never
// answers for the client's (KafkaApis, Kafka 4.0):
//
//   - FindCoordinator for a group: DESCRIBE on the group, else
//     GROUP_AUTHORIZATION_FAILED, the upstream not asked
//     (getCoordinator).
//   - JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat:
//     READ on the group, else the request's error answer with
//     GROUP_AUTHORIZATION_FAILED (getErrorResponse). ConsumerGroupHeartbeat
//     naming its topics also needs DESCRIBE on each, else
//     TOPIC_AUTHORIZATION_FAILED (KAFKA-18813).
//   - OffsetCommit: READ on the group, else every partition
//     GROUP_AUTHORIZATION_FAILED; then READ on each topic, else its
//     partitions TOPIC_AUTHORIZATION_FAILED, and only the rest is
//     forwarded (handleOffsetCommitRequest).
//   - OffsetFetch: DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED
//     (top level before v8, per group from v8, per partition at v0-1,
//     OffsetFetchResponse.groupError); then DESCRIBE on each topic asked,
//     else its partitions TOPIC_AUTHORIZATION_FAILED with offset -1; asked
//     for all, the answer leaves out what may not be described
//     (fetchOffsetsForGroup, fetchAllOffsetsForGroup).
//   - DescribeGroups and ConsumerGroupDescribe: DESCRIBE on each group,
//     else that group GROUP_AUTHORIZATION_FAILED; authorized operations
//     (v3+, when asked) are the client's, not kfollower's. A consumer
//     group whose assignment names a topic the principal may not describe
//     is TOPIC_AUTHORIZATION_FAILED without its members (KAFKA-18813).
//   - ListGroups: every group with DESCRIBE on the cluster, else only the
//     groups the principal may describe, without a denial logged
//     (handleListGroupsRequest).
//   - OffsetCommit and OffsetFetch v10+ name topics by id: an id this copy
//     does not serve cannot be checked and is UNKNOWN_TOPIC_ID, as Kafka
//     answers an id it does not know.
//
// A denial is counted and audited per topic or group and request.

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
	cc.undescribable(len(resp.Topics), func(i int) string { return resp.Topics[i].Topic }, func(i int) {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			p.ErrorCode = kerr.TopicAuthorizationFailed.Code
			p.Timestamp, p.Offset, p.LeaderEpoch = -1, -1, -1
		}
	})
}

// authorizeOffsetForLeaderEpoch answers TOPIC_AUTHORIZATION_FAILED, epoch
// and end offset -1, for every partition of a topic the principal may not
// DESCRIBE.
func (cc *conn) authorizeOffsetForLeaderEpoch(resp *kmsg.OffsetForLeaderEpochResponse) {
	cc.undescribable(len(resp.Topics), func(i int) string { return resp.Topics[i].Topic }, func(i int) {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			p.ErrorCode = kerr.TopicAuthorizationFailed.Code
			p.LeaderEpoch, p.EndOffset = -1, -1
		}
	})
}

// undescribable calls deny(i) for each of n answered topics, topic(i)
// named, that the principal may not DESCRIBE.
func (cc *conn) undescribable(n int, topic func(int) string, deny func(int)) {
	a := cc.topicAuth(authz.Describe)
	for i := 0; i < n; i++ {
		if !a.ok(topic(i)) {
			deny(i)
		}
	}
}

// topicOperations is a topic's authorized operations (KIP-430 bits) for
// the principal: READ and DESCRIBE as granted.
func (cc *conn) topicOperations(topic string) int32 {
	return cc.operations(authz.Topic, topic)
}

// operations is the KIP-430 bits of READ and DESCRIBE on a resource, as
// granted (both without an Authorizer).
func (cc *conn) operations(rt authz.ResourceType, name string) int32 {
	var ops int32
	if cc.authorized(authz.Read, rt, name, true) {
		ops |= aclRead
	}
	if cc.authorized(authz.Describe, rt, name, true) {
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

// groupCheck is a group request after authorization: what to forward,
// or, with nothing to forward, the whole answer.
type groupCheck struct {
	// forward is the request to send upstream: the client's, or a copy
	// without what was denied. Nil: answer is the answer.
	forward kmsg.Request
	answer  kmsg.Response
	// finish, if set, completes the upstream's answer: the denials added,
	// what the principal may not see taken out.
	finish func(kmsg.Response)
}

// Messages of the local denials, where the answer has a message field.
const (
	groupDeniedMsg = "Group authorization failed."
	topicDeniedMsg = "Topic authorization failed."
)

// authorizeGroup checks a group request (doc above). Without an
// Authorizer it is forwarded as it is.
func (cc *conn) authorizeGroup(req kmsg.Request) groupCheck {
	if cc.s.cfg.Authorizer == nil {
		return groupCheck{forward: req}
	}
	readGroup := func(group string) groupCheck {
		if !cc.authorized(authz.Read, authz.Group, group, false) {
			return groupCheck{answer: groupError(req, kerr.GroupAuthorizationFailed.Code, groupDeniedMsg)}
		}
		return groupCheck{forward: req}
	}
	// By key, not a type switch: the package asserts only to *kmsg types
	// (readonly_test.go).
	switch req.Key() {
	case 11:
		return readGroup(req.(*kmsg.JoinGroupRequest).Group)
	case 14:
		return readGroup(req.(*kmsg.SyncGroupRequest).Group)
	case 12:
		return readGroup(req.(*kmsg.HeartbeatRequest).Group)
	case 13:
		return readGroup(req.(*kmsg.LeaveGroupRequest).Group)
	case 68:
		r := req.(*kmsg.ConsumerGroupHeartbeatRequest)
		if c := readGroup(r.Group); c.forward == nil {
			return c
		}
		// Every topic is checked, so each denial is audited, as
		// filterByAuthorized does.
		a, denied := cc.topicAuth(authz.Describe), false
		for _, t := range r.SubscribedTopicNames {
			denied = !a.ok(t) || denied
		}
		if denied {
			return groupCheck{answer: groupError(req, kerr.TopicAuthorizationFailed.Code, topicDeniedMsg)}
		}
		return groupCheck{forward: req}
	case 8:
		return cc.authorizeOffsetCommit(req.(*kmsg.OffsetCommitRequest))
	case 9:
		r := req.(*kmsg.OffsetFetchRequest)
		if r.Version < 8 {
			return cc.authorizeOffsetFetchOne(r)
		}
		return cc.authorizeOffsetFetch(r)
	case 15:
		return cc.authorizeDescribeGroups(req.(*kmsg.DescribeGroupsRequest))
	case 69:
		return cc.authorizeConsumerGroupDescribe(req.(*kmsg.ConsumerGroupDescribeRequest))
	case 16:
		return groupCheck{forward: req, finish: func(resp kmsg.Response) {
			if cc.authorized(authz.Describe, authz.Cluster, authz.ClusterName, true) {
				return // every group, as for an operator
			}
			lr := resp.(*kmsg.ListGroupsResponse)
			kept := lr.Groups[:0]
			for _, g := range lr.Groups {
				if cc.authorized(authz.Describe, authz.Group, g.Group, true) {
					kept = append(kept, g)
				}
			}
			lr.Groups = kept
		}}
	}
	return groupCheck{forward: req}
}

// groupError is the error answer to a request of one group, code where
// the client reads it (each request's getErrorResponse): JoinGroup with
// generation -1 and no member id, OffsetCommit in every partition.
func groupError(req kmsg.Request, code int16, msg string) kmsg.Response {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	switch resp.Key() {
	case 11: // Generation -1, MemberID and LeaderID "" by default
		resp.(*kmsg.JoinGroupResponse).ErrorCode = code
	case 14:
		r := resp.(*kmsg.SyncGroupResponse)
		r.ErrorCode, r.MemberAssignment = code, []byte{}
	case 12:
		resp.(*kmsg.HeartbeatResponse).ErrorCode = code
	case 13:
		resp.(*kmsg.LeaveGroupResponse).ErrorCode = code
	case 68:
		r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
		r.ErrorCode, r.ErrorMessage = code, kmsg.StringPtr(msg)
	case 8:
		r := resp.(*kmsg.OffsetCommitResponse)
		for _, t := range req.(*kmsg.OffsetCommitRequest).Topics {
			r.Topics = append(r.Topics, CommitTopicError(t, code))
		}
	case 9:
		r, q := resp.(*kmsg.OffsetFetchResponse), req.(*kmsg.OffsetFetchRequest)
		if q.Version >= 2 {
			r.ErrorCode = code
			break
		}
		for _, t := range q.Topics { // v0-1: no top-level error
			r.Topics = append(r.Topics, fetchTopicError(t.Topic, t.Partitions, code))
		}
	}
	return resp
}

// CommitTopicError answers every partition of one OffsetCommit topic with
// code: a denial here, an unreachable upstream in package groups.
func CommitTopicError(t kmsg.OffsetCommitRequestTopic, code int16) kmsg.OffsetCommitResponseTopic {
	rt := kmsg.NewOffsetCommitResponseTopic()
	rt.Topic, rt.TopicID = t.Topic, t.TopicID
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetCommitResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// fetchTopicError is a topic of OffsetFetch v0-7 whose partitions all
// failed: offset -1, no metadata.
func fetchTopicError(topic string, parts []int32, code int16) kmsg.OffsetFetchResponseTopic {
	rt := kmsg.NewOffsetFetchResponseTopic()
	rt.Topic = topic
	for _, p := range parts {
		rp := kmsg.NewOffsetFetchResponseTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata, rp.ErrorCode = p, -1, kmsg.StringPtr(""), code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// groupTopicError is fetchTopicError for OffsetFetch v8+.
func groupTopicError(t kmsg.OffsetFetchRequestGroupTopic, code int16) kmsg.OffsetFetchResponseGroupTopic {
	rt := kmsg.NewOffsetFetchResponseGroupTopic()
	rt.Topic, rt.TopicID = t.Topic, t.TopicID
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata, rp.ErrorCode = p, -1, kmsg.StringPtr(""), code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// groupTopics checks the topics of one group request: by name, or, at
// the version topics are named by id, by the served topic of that id.
type groupTopics struct {
	a     *topicAuth
	byID  bool
	names map[[16]byte]string
}

func (cc *conn) groupTopics(op authz.Operation, byID bool) *groupTopics {
	g := &groupTopics{a: cc.topicAuth(op), byID: byID}
	if byID {
		g.names = map[[16]byte]string{}
		for _, t := range cc.s.cfg.Catalog.Topics() {
			g.names[t.ID] = t.Name
		}
	}
	return g
}

// check is 0 for a topic the principal may use, else the partitions'
// error: UNKNOWN_TOPIC_ID first for an id not served, as KafkaApis
// resolves ids before it authorizes.
func (g *groupTopics) check(name string, id [16]byte) int16 {
	if g.byID {
		n, ok := g.names[id]
		if !ok || id == ([16]byte{}) {
			return kerr.UnknownTopicID.Code
		}
		name = n
	}
	if !g.a.ok(name) {
		return kerr.TopicAuthorizationFailed.Code
	}
	return 0
}

// splitTopics is the topics a request may keep, and the answers of those
// it may not (deny's bool true).
func splitTopics[T, R any](ts []T, deny func(T) (R, bool)) (kept []T, denied []R) {
	for _, t := range ts {
		if answer, no := deny(t); no {
			denied = append(denied, answer)
			continue
		}
		kept = append(kept, t)
	}
	return kept, denied
}

// authorizeOffsetCommit: READ on the group, then on each topic; only the
// allowed topics are forwarded, the denied ones answered here, first, as
// handleOffsetCommitRequest's responseBuilder has them.
func (cc *conn) authorizeOffsetCommit(r *kmsg.OffsetCommitRequest) groupCheck {
	if !cc.authorized(authz.Read, authz.Group, r.Group, false) {
		return groupCheck{answer: groupError(r, kerr.GroupAuthorizationFailed.Code, groupDeniedMsg)}
	}
	g := cc.groupTopics(authz.Read, r.Version >= 10)
	kept, denied := splitTopics(r.Topics, func(t kmsg.OffsetCommitRequestTopic) (kmsg.OffsetCommitResponseTopic, bool) {
		code := g.check(t.Topic, t.TopicID)
		return CommitTopicError(t, code), code != 0
	})
	sub := *r
	sub.Topics = kept
	return topicsCheck(r, &sub, len(kept), len(denied), func(resp kmsg.Response) {
		cr := resp.(*kmsg.OffsetCommitResponse)
		cr.Topics = append(denied, cr.Topics...)
	})
}

// topicsCheck forwards req whole when no topic was denied, answers it
// alone (finish filling in the denied topics) when none is kept, and else
// forwards sub, the request cut to the kept topics, with finish adding
// the denied ones to the upstream's answer.
func topicsCheck(req, sub kmsg.Request, kept, denied int, finish func(kmsg.Response)) groupCheck {
	switch {
	case denied == 0:
		return groupCheck{forward: req}
	case kept == 0:
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		finish(resp)
		return groupCheck{answer: resp}
	}
	return groupCheck{forward: sub, finish: finish}
}

// authorizeOffsetFetchOne is OffsetFetch v0-7, of one group.
func (cc *conn) authorizeOffsetFetchOne(r *kmsg.OffsetFetchRequest) groupCheck {
	if !cc.authorized(authz.Describe, authz.Group, r.Group, false) {
		return groupCheck{answer: groupError(r, kerr.GroupAuthorizationFailed.Code, groupDeniedMsg)}
	}
	if r.Topics == nil { // v2+: every topic the group has offsets for
		a := cc.topicAuth(authz.Describe)
		return groupCheck{forward: r, finish: func(resp kmsg.Response) {
			fr := resp.(*kmsg.OffsetFetchResponse)
			kept := fr.Topics[:0]
			for _, t := range fr.Topics {
				if a.ok(t.Topic) {
					kept = append(kept, t)
				}
			}
			fr.Topics = kept
		}}
	}
	a := cc.topicAuth(authz.Describe)
	kept, denied := splitTopics(r.Topics, func(t kmsg.OffsetFetchRequestTopic) (kmsg.OffsetFetchResponseTopic, bool) {
		return fetchTopicError(t.Topic, t.Partitions, kerr.TopicAuthorizationFailed.Code), !a.ok(t.Topic)
	})
	sub := *r
	sub.Topics = kept
	return topicsCheck(r, &sub, len(kept), len(denied), func(resp kmsg.Response) {
		if fr := resp.(*kmsg.OffsetFetchResponse); fr.ErrorCode == 0 {
			fr.Topics = append(fr.Topics, denied...)
		}
	})
}

// authorizeOffsetFetch is OffsetFetch v8+, of several groups (KIP-709),
// each checked on its own; the answer keeps the request's group order.
func (cc *conn) authorizeOffsetFetch(r *kmsg.OffsetFetchRequest) groupCheck {
	type part struct {
		local   *kmsg.OffsetFetchResponseGroup // answered here
		all     bool                           // every topic asked: filter the answer
		denied  []kmsg.OffsetFetchResponseGroupTopic
		checker *groupTopics
	}
	parts := make([]part, len(r.Groups))
	var fwd []kmsg.OffsetFetchRequestGroup
	for i, rg := range r.Groups {
		p := &parts[i]
		if !cc.authorized(authz.Describe, authz.Group, rg.Group, false) {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = rg.Group, kerr.GroupAuthorizationFailed.Code
			p.local = &g
			continue
		}
		p.checker = cc.groupTopics(authz.Describe, r.Version >= 10)
		if rg.Topics == nil {
			p.all = true
			fwd = append(fwd, rg)
			continue
		}
		var kept []kmsg.OffsetFetchRequestGroupTopic
		kept, p.denied = splitTopics(rg.Topics, func(t kmsg.OffsetFetchRequestGroupTopic) (kmsg.OffsetFetchResponseGroupTopic, bool) {
			code := p.checker.check(t.Topic, t.TopicID)
			return groupTopicError(t, code), code != 0
		})
		if len(kept) == 0 && len(p.denied) > 0 {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.Topics = rg.Group, p.denied
			p.local = &g
			continue
		}
		rg.Topics = kept
		fwd = append(fwd, rg)
	}
	merge := func(upstream []kmsg.OffsetFetchResponseGroup) []kmsg.OffsetFetchResponseGroup {
		got := map[string]kmsg.OffsetFetchResponseGroup{}
		for _, g := range upstream {
			got[g.Group] = g
		}
		out := make([]kmsg.OffsetFetchResponseGroup, 0, len(parts))
		for i, p := range parts {
			if p.local != nil {
				out = append(out, *p.local)
				continue
			}
			g, ok := got[r.Groups[i].Group]
			if !ok {
				continue
			}
			if p.all {
				kept := g.Topics[:0:0]
				for _, t := range g.Topics {
					if p.checker.check(t.Topic, t.TopicID) == 0 {
						kept = append(kept, t)
					}
				}
				g.Topics = kept
			} else if g.ErrorCode == 0 {
				g.Topics = append(g.Topics, p.denied...)
			}
			out = append(out, g)
		}
		return out
	}
	if len(fwd) == 0 {
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.SetVersion(r.Version)
		resp.Groups = merge(nil)
		return groupCheck{answer: resp}
	}
	sub := *r
	sub.Groups = fwd
	return groupCheck{forward: &sub, finish: func(resp kmsg.Response) {
		fr := resp.(*kmsg.OffsetFetchResponse)
		fr.Groups = merge(fr.Groups)
	}}
}

// describedGroups splits the groups of DescribeGroups or
// ConsumerGroupDescribe into those the principal may DESCRIBE and those
// it may not.
func (cc *conn) describedGroups(groups []string) (allowed, denied []string) {
	for _, g := range groups {
		if cc.authorized(authz.Describe, authz.Group, g, false) {
			allowed = append(allowed, g)
		} else {
			denied = append(denied, g)
		}
	}
	return allowed, denied
}

// authorizeDescribeGroups: the denied groups first, then the upstream's
// answers, as handleDescribeGroupsRequest builds its response.
func (cc *conn) authorizeDescribeGroups(r *kmsg.DescribeGroupsRequest) groupCheck {
	allowed, deniedNames := cc.describedGroups(r.Groups)
	var denied []kmsg.DescribeGroupsResponseGroup
	for _, g := range deniedNames {
		d := kmsg.NewDescribeGroupsResponseGroup() // state, protocol "", operations omitted
		d.Group, d.ErrorCode, d.ErrorMessage = g, kerr.GroupAuthorizationFailed.Code, kmsg.StringPtr(groupDeniedMsg)
		denied = append(denied, d)
	}
	finish := func(resp kmsg.Response) {
		dr := resp.(*kmsg.DescribeGroupsResponse)
		for i := range dr.Groups {
			if g := &dr.Groups[i]; r.IncludeAuthorizedOperations && g.ErrorCode == 0 {
				g.AuthorizedOperations = cc.operations(authz.Group, g.Group)
			}
		}
		dr.Groups = append(denied, dr.Groups...)
	}
	sub := *r
	sub.Groups = allowed
	return describeCheck(r, &sub, len(allowed) == 0, finish)
}

// describeCheck forwards sub, a describe request cut to the groups the
// principal may describe, and finishes its answer with the denied ones;
// with none allowed it answers req alone, asking the upstream nothing.
func describeCheck(req, sub kmsg.Request, none bool, finish func(kmsg.Response)) groupCheck {
	if none {
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		finish(resp)
		return groupCheck{answer: resp}
	}
	return groupCheck{forward: sub, finish: finish}
}

// authorizeConsumerGroupDescribe is authorizeDescribeGroups for KIP-848
// groups, and a described group whose members' assignment or target
// assignment names a topic the principal may not describe is
// TOPIC_AUTHORIZATION_FAILED without its members (KAFKA-18813, Kafka
// 4.0).
func (cc *conn) authorizeConsumerGroupDescribe(r *kmsg.ConsumerGroupDescribeRequest) groupCheck {
	allowed, deniedNames := cc.describedGroups(r.Groups)
	var denied []kmsg.ConsumerGroupDescribeResponseGroup
	for _, g := range deniedNames {
		d := kmsg.NewConsumerGroupDescribeResponseGroup()
		d.Group, d.ErrorCode, d.ErrorMessage = g, kerr.GroupAuthorizationFailed.Code, kmsg.StringPtr(groupDeniedMsg)
		denied = append(denied, d)
	}
	finish := func(resp kmsg.Response) {
		dr := resp.(*kmsg.ConsumerGroupDescribeResponse)
		var names *groupTopics // by id, for a topic the upstream did not name
		for i := range dr.Groups {
			g := &dr.Groups[i]
			if g.ErrorCode != 0 {
				continue
			}
			if names == nil {
				names = cc.groupTopics(authz.Describe, true)
			}
			if !names.assignmentsAllowed(g.Members) {
				d := kmsg.NewConsumerGroupDescribeResponseGroup()
				d.Group, d.ErrorCode, d.ErrorMessage = g.Group, kerr.TopicAuthorizationFailed.Code, kmsg.StringPtr(topicDeniedMsg)
				*g = d
				continue
			}
			if r.IncludeAuthorizedOperations {
				g.AuthorizedOperations = cc.operations(authz.Group, g.Group)
			}
		}
		dr.Groups = append(denied, dr.Groups...)
	}
	sub := *r
	sub.Groups = allowed
	return describeCheck(r, &sub, len(allowed) == 0, finish)
}

// assignmentsAllowed reports whether the principal may describe every
// topic of the members' assignments and target assignments, each topic
// by its name, or, unnamed, by the served topic of its id.
func (g *groupTopics) assignmentsAllowed(members []kmsg.ConsumerGroupDescribeResponseGroupMember) bool {
	ok := true
	for _, m := range members {
		for _, as := range []kmsg.Assignment{m.Assignment, m.TargetAssignment} {
			for _, tp := range as.TopicPartitions {
				code := int16(0)
				if tp.Topic != "" {
					if !g.a.ok(tp.Topic) {
						code = kerr.TopicAuthorizationFailed.Code
					}
				} else {
					code = g.check("", tp.TopicID)
				}
				ok = ok && code == 0
			}
		}
	}
	return ok
}
