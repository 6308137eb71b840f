package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kfollower/kfollower/authz"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// echoGroups is an upstream that answers every forwarded group request
// as a cluster would for a principal allowed everything, and records
// what it was asked.
type echoGroups struct {
	ids     map[string][16]byte // the cluster's topic ids
	mu      sync.Mutex
	lookups []string       // Coordinator's groups
	seen    []kmsg.Request // forwarded
}

func (g *echoGroups) Versions(key int16) (int16, int16, bool) {
	return 0, kmsg.RequestForKey(key).MaxVersion(), true
}

func (g *echoGroups) Coordinator(_ context.Context, group string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lookups = append(g.lookups, group)
	return nil
}

func (g *echoGroups) Open() GroupSession { return echoSession{g} }

// upstreamOps is what the upstream says kfollower's principal may do with
// a group: more than any test principal.
const upstreamOps = 0x1ff8

type echoSession struct{ g *echoGroups }

func (s echoSession) Close() {}

func (s echoSession) Forward(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	s.g.mu.Lock()
	s.g.seen = append(s.g.seen, req)
	s.g.mu.Unlock()
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	switch r := resp.(type) {
	case *kmsg.OffsetCommitResponse:
		for _, t := range req.(*kmsg.OffsetCommitRequest).Topics {
			r.Topics = append(r.Topics, CommitTopicError(t, 0))
		}
	case *kmsg.OffsetFetchResponse:
		q := req.(*kmsg.OffsetFetchRequest)
		if q.Version < 8 {
			if q.Topics == nil {
				q.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}, {Topic: "secret", Partitions: []int32{0}}}
			}
			for _, t := range q.Topics {
				rt := fetchTopicError(t.Topic, t.Partitions, 0)
				for i := range rt.Partitions {
					rt.Partitions[i].Offset = 5
				}
				r.Topics = append(r.Topics, rt)
			}
			break
		}
		for _, qg := range q.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = qg.Group
			ts := qg.Topics
			if ts == nil {
				ts = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", TopicID: s.g.ids["t"], Partitions: []int32{0}}, {Topic: "secret", TopicID: s.g.ids["secret"], Partitions: []int32{0}}}
			}
			for _, t := range ts {
				rt := groupTopicError(t, 0)
				for i := range rt.Partitions {
					rt.Partitions[i].Offset = 5
				}
				rg.Topics = append(rg.Topics, rt)
			}
			r.Groups = append(r.Groups, rg)
		}
	case *kmsg.DescribeGroupsResponse:
		for _, g := range req.(*kmsg.DescribeGroupsRequest).Groups {
			d := kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.State, d.AuthorizedOperations = g, "Stable", upstreamOps
			r.Groups = append(r.Groups, d)
		}
	case *kmsg.ConsumerGroupDescribeResponse:
		for _, g := range req.(*kmsg.ConsumerGroupDescribeRequest).Groups {
			d := kmsg.NewConsumerGroupDescribeResponseGroup()
			d.Group, d.State, d.AuthorizedOperations = g, "Stable", upstreamOps
			topic := "t"
			if g == "gs" { // a group of d's assigned secret
				topic = "secret"
			}
			m := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			m.MemberID = "m1"
			m.Assignment.TopicPartitions = []kmsg.AssignmentTopicPartition{{TopicID: s.g.ids[topic], Topic: topic, Partitions: []int32{0}}}
			d.Members = append(d.Members, m)
			r.Groups = append(r.Groups, d)
		}
	case *kmsg.ListGroupsResponse:
		for _, g := range []string{"g", "d", "x"} {
			lg := kmsg.NewListGroupsResponseGroup()
			lg.Group, lg.ProtocolType = g, "consumer"
			r.Groups = append(r.Groups, lg)
		}
	}
	return resp, nil
}

// take returns what was forwarded since the last take.
func (g *echoGroups) take() (lookups []string, seen []kmsg.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	lookups, seen = g.lookups, g.seen
	g.lookups, g.seen = nil, nil
	return lookups, seen
}

// syncBuffer is a log destination tests read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// The anonymous principal may read topic t, read group g and describe
// group d (describe only); secret and group x are denied.
const groupACL = `
ALLOW User:ANONYMOUS READ     TOPIC LITERAL t
ALLOW User:ANONYMOUS READ     GROUP LITERAL g
ALLOW User:ANONYMOUS DESCRIBE GROUP LITERAL d
`

type groupACLServer struct {
	t    *testing.T
	c    *client
	up   *echoGroups
	rec  *recorder
	logs *syncBuffer
	cat  *testCatalog
}

func newGroupACLServer(t *testing.T, acl string) *groupACLServer {
	rules, err := authz.ParseACLs("acl", []byte(acl))
	if err != nil {
		t.Fatal(err)
	}
	cat := secCatalog(t)
	s := &groupACLServer{t: t, up: &echoGroups{ids: map[string][16]byte{"t": cat.id("t"), "secret": cat.id("secret")}},
		rec: newRecorder(), logs: &syncBuffer{}, cat: cat}
	_, addr := testServer(t, cat, func(c *Config) {
		c.Groups, c.Authorizer, c.Observer = s.up, rules, s.rec
		c.Logger = slog.New(slog.NewTextHandler(s.logs, nil))
	})
	s.c = dial(t, addr)
	return s
}

// denied is the number of denials counted for "OP TYPE".
func (s *groupACLServer) denied(what string) int {
	return s.rec.get(func(r *recorder) int { return r.denied[what] })
}

// ask sends req and checks what reached the upstream: the requests
// forwarded, none when forwarded is 0.
func (s *groupACLServer) ask(req kmsg.Request, forwarded int) (kmsg.Response, []kmsg.Request) {
	s.t.Helper()
	resp := s.c.do(req)
	_, seen := s.up.take()
	if len(seen) != forwarded {
		s.t.Errorf("%s v%d: %d requests forwarded, want %d", kmsg.NameForKey(req.Key()), req.GetVersion(), len(seen), forwarded)
	}
	return resp, seen
}

// FindCoordinator names this broker for a group the principal may
// describe (READ implies DESCRIBE) and answers GROUP_AUTHORIZATION_FAILED
// for another without asking the upstream, at every version; the denial
// is counted and audited.
func TestGroupACLFindCoordinator(t *testing.T) {
	s := newGroupACLServer(t, groupACL)
	for _, v := range versions(10) {
		for _, tc := range []struct {
			key  string
			code int16
		}{{"g", 0}, {"d", 0}, {"x", kerr.GroupAuthorizationFailed.Code}} {
			req := at(kmsg.NewPtrFindCoordinatorRequest(), v)
			req.CoordinatorKey, req.CoordinatorKeys = tc.key, []string{tc.key}
			r := s.c.do(req).(*kmsg.FindCoordinatorResponse)
			code, node, msg := r.ErrorCode, r.NodeID, r.ErrorMessage
			if v >= 4 {
				code, node, msg = r.Coordinators[0].ErrorCode, r.Coordinators[0].NodeID, r.Coordinators[0].ErrorMessage
			}
			lookups, _ := s.up.take()
			if code != tc.code {
				t.Errorf("v%d %q: %v, want %v", v, tc.key, kerr.ErrorForCode(code), kerr.ErrorForCode(tc.code))
			}
			if tc.code == 0 && (node != 7 || fmt.Sprint(lookups) != fmt.Sprintf("[%s]", tc.key)) {
				t.Errorf("v%d %q: node %d, upstream asked for %v, want this broker (7) after asking for the group", v, tc.key, node, lookups)
			}
			if tc.code != 0 && (node != -1 || len(lookups) != 0 || v >= 1 && msg == nil) {
				t.Errorf("v%d %q: node %d message %v, upstream asked for %v, want -1, a message and no upstream lookup", v, tc.key, node, msg, lookups)
			}
		}
	}
	if n, want := s.denied("DESCRIBE GROUP"), len(versions(10)); n != want {
		t.Errorf("%d DESCRIBE GROUP denials counted, want %d (one a request)", n, want)
	}
	if l := s.logs.String(); !strings.Contains(l, "authorization denied") || !strings.Contains(l, "resource=x") || !strings.Contains(l, "resource_type=GROUP") {
		t.Errorf("audit log has no denial of group x:\n%s", l)
	}
}

// JoinGroup, SyncGroup, Heartbeat, LeaveGroup and ConsumerGroupHeartbeat
// need READ on the group: DESCRIBE alone (group d) is
// GROUP_AUTHORIZATION_FAILED in the answer's error, at every version,
// and nothing is forwarded; READ (group g) is forwarded.
// ConsumerGroupHeartbeat naming a topic the principal may not describe
// is TOPIC_AUTHORIZATION_FAILED.
func TestGroupACLMembership(t *testing.T) {
	s := newGroupACLServer(t, groupACL)
	type build func(group string, v int16) kmsg.Request
	cases := []struct {
		key   int16
		build build
		code  func(kmsg.Response) int16
	}{
		{11, func(g string, v int16) kmsg.Request {
			r := at(kmsg.NewPtrJoinGroupRequest(), v)
			r.Group, r.MemberID, r.ProtocolType = g, "m1", "consumer"
			return r
		}, func(r kmsg.Response) int16 {
			j := r.(*kmsg.JoinGroupResponse)
			if j.ErrorCode != 0 && (j.Generation != -1 || j.MemberID != "" || len(j.Members) != 0) {
				t.Errorf("JoinGroup v%d denied: generation %d member %q members %d, want -1, \"\" and none", j.Version, j.Generation, j.MemberID, len(j.Members))
			}
			return j.ErrorCode
		}},
		{14, func(g string, v int16) kmsg.Request {
			r := at(kmsg.NewPtrSyncGroupRequest(), v)
			r.Group, r.MemberID = g, "m1"
			return r
		}, func(r kmsg.Response) int16 {
			sg := r.(*kmsg.SyncGroupResponse)
			if sg.ErrorCode != 0 && len(sg.MemberAssignment) != 0 {
				t.Errorf("SyncGroup denied with an assignment")
			}
			return sg.ErrorCode
		}},
		{12, func(g string, v int16) kmsg.Request {
			r := at(kmsg.NewPtrHeartbeatRequest(), v)
			r.Group = g
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode }},
		{13, func(g string, v int16) kmsg.Request {
			r := at(kmsg.NewPtrLeaveGroupRequest(), v)
			r.Group, r.MemberID = g, "m1"
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.LeaveGroupResponse).ErrorCode }},
		{68, func(g string, v int16) kmsg.Request {
			r := at(kmsg.NewPtrConsumerGroupHeartbeatRequest(), v)
			r.Group, r.SubscribedTopicNames = g, []string{"t"}
			return r
		}, func(r kmsg.Response) int16 {
			h := r.(*kmsg.ConsumerGroupHeartbeatResponse)
			if h.ErrorCode != 0 && h.ErrorMessage == nil {
				t.Error("ConsumerGroupHeartbeat denied without a message")
			}
			return h.ErrorCode
		}},
	}
	for _, tc := range cases {
		name := kmsg.NameForKey(tc.key)
		for _, v := range versions(tc.key) {
			before := s.denied("READ GROUP")
			resp, _ := s.ask(tc.build("d", v), 0)
			if code := tc.code(resp); code != kerr.GroupAuthorizationFailed.Code {
				t.Errorf("%s v%d, group d (DESCRIBE only): %v, want GROUP_AUTHORIZATION_FAILED", name, v, kerr.ErrorForCode(code))
			}
			if n := s.denied("READ GROUP") - before; n != 1 {
				t.Errorf("%s v%d: %d READ GROUP denials counted, want 1", name, v, n)
			}
			resp, _ = s.ask(tc.build("g", v), 1)
			if code := tc.code(resp); code != 0 {
				t.Errorf("%s v%d, group g: %v, want the upstream's answer", name, v, kerr.ErrorForCode(code))
			}
		}
	}
	for _, v := range versions(68) {
		req := at(kmsg.NewPtrConsumerGroupHeartbeatRequest(), v)
		req.Group, req.SubscribedTopicNames = "g", []string{"t", "secret", "no-such"}
		before := s.denied("DESCRIBE TOPIC")
		resp, _ := s.ask(req, 0)
		if code := resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
			t.Errorf("ConsumerGroupHeartbeat v%d subscribing to secret: %v, want TOPIC_AUTHORIZATION_FAILED", v, kerr.ErrorForCode(code))
		}
		if n := s.denied("DESCRIBE TOPIC") - before; n != 2 {
			t.Errorf("ConsumerGroupHeartbeat v%d: %d DESCRIBE TOPIC denials, want 2 (secret, no-such)", v, n)
		}
	}
}

// OffsetCommit needs READ on the group (every partition
// GROUP_AUTHORIZATION_FAILED otherwise) and READ on each topic: a denied
// topic's partitions are TOPIC_AUTHORIZATION_FAILED, and only the other
// topics are forwarded; v10+ names topics by id, an id not served being
// UNKNOWN_TOPIC_ID.
func TestGroupACLOffsetCommit(t *testing.T) {
	s := newGroupACLServer(t, groupACL)
	commit := func(v int16, group string, topics ...string) *kmsg.OffsetCommitRequest {
		r := at(kmsg.NewPtrOffsetCommitRequest(), v)
		r.Group = group
		for _, n := range topics {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic, rt.TopicID = n, s.cat.topics[n].idOr(n)
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			p.Partition, p.Offset = 0, 2
			rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{p}
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	// codes is each topic's error, by name, or by id (v10+).
	codes := func(v int16, resp kmsg.Response) map[string]int16 {
		out := map[string]int16{}
		for _, rt := range resp.(*kmsg.OffsetCommitResponse).Topics {
			n := rt.Topic
			if v >= 10 {
				n = s.nameOf(rt.TopicID)
			}
			out[n] = rt.Partitions[0].ErrorCode
		}
		return out
	}
	for _, v := range versions(8) {
		resp, _ := s.ask(commit(v, "d", "t"), 0)
		if got := codes(v, resp); got["t"] != kerr.GroupAuthorizationFailed.Code {
			t.Errorf("v%d group d (DESCRIBE only): %v, want t GROUP_AUTHORIZATION_FAILED", v, got)
		}
		before := s.denied("READ TOPIC")
		resp, seen := s.ask(commit(v, "g", "t", "secret"), 1)
		want := map[string]int16{"t": 0, "secret": kerr.TopicAuthorizationFailed.Code}
		if got := codes(v, resp); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("v%d group g, t and secret: %v, want %v", v, got, want)
		}
		if len(seen) == 1 {
			if f := seen[0].(*kmsg.OffsetCommitRequest); len(f.Topics) != 1 || f.Topics[0].Topic != "t" && s.nameOf(f.Topics[0].TopicID) != "t" {
				t.Errorf("v%d: forwarded %+v, want t alone", v, f.Topics)
			}
		}
		if n := s.denied("READ TOPIC") - before; n != 1 {
			t.Errorf("v%d: %d READ TOPIC denials, want 1", v, n)
		}
		resp, _ = s.ask(commit(v, "g", "secret"), 0)
		if got := codes(v, resp); got["secret"] != kerr.TopicAuthorizationFailed.Code {
			t.Errorf("v%d group g, secret alone: %v, want TOPIC_AUTHORIZATION_FAILED without forwarding", v, got)
		}
		if v >= 10 {
			resp, _ = s.ask(commit(v, "g", "unserved"), 0)
			if got := codes(v, resp); got["unserved"] != kerr.UnknownTopicID.Code {
				t.Errorf("v%d an id not served: %v, want UNKNOWN_TOPIC_ID", v, got)
			}
		}
	}
}

// idOr is the topic's id; a topic not in the catalog gets a made-up one.
func (tp *testTopic) idOr(string) [16]byte {
	if tp == nil {
		return [16]byte{0xee, 15: 0xee}
	}
	return tp.id
}

func (s *groupACLServer) nameOf(id [16]byte) string {
	for _, tp := range s.cat.Topics() {
		if tp.ID == id {
			return tp.Name
		}
	}
	return "unserved"
}

// OffsetFetch needs DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED
// where the version reads it: partitions at v0-1, top level at v2-7, the
// group at v8+) and DESCRIBE on each topic asked (offset -1 and
// TOPIC_AUTHORIZATION_FAILED); asked for every topic, the answer leaves
// out secret. v8+ answers each group on its own, in the request's order,
// and forwards only what was allowed.
func TestGroupACLOffsetFetch(t *testing.T) {
	s := newGroupACLServer(t, groupACL+"ALLOW User:ANONYMOUS DESCRIBE GROUP LITERAL d2\n")
	for _, v := range versions(9) {
		if v >= 8 {
			continue
		}
		r := at(kmsg.NewPtrOffsetFetchRequest(), v)
		r.Group, r.Topics = "x", []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		resp, _ := s.ask(r, 0)
		fr := resp.(*kmsg.OffsetFetchResponse)
		if v >= 2 && fr.ErrorCode != kerr.GroupAuthorizationFailed.Code ||
			v < 2 && (len(fr.Topics) != 1 || fr.Topics[0].Partitions[0].ErrorCode != kerr.GroupAuthorizationFailed.Code || fr.Topics[0].Partitions[0].Offset != -1) {
			t.Errorf("v%d group x: %+v, want GROUP_AUTHORIZATION_FAILED", v, fr)
		}
		r = at(kmsg.NewPtrOffsetFetchRequest(), v)
		r.Group, r.Topics = "d", []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}, {Topic: "secret", Partitions: []int32{0}}}
		resp, seen := s.ask(r, 1)
		got := fetchedV0(resp.(*kmsg.OffsetFetchResponse).Topics)
		if want := "secret:-1:TOPIC_AUTHORIZATION_FAILED t:5:NONE"; got != want {
			t.Errorf("v%d group d, t and secret: %s, want %s", v, got, want)
		}
		if len(seen) == 1 && len(seen[0].(*kmsg.OffsetFetchRequest).Topics) != 1 {
			t.Errorf("v%d: forwarded %+v, want t alone", v, seen[0].(*kmsg.OffsetFetchRequest).Topics)
		}
		if v >= 2 {
			r.Topics = nil // every topic
			resp, _ = s.ask(r, 1)
			if got := fetchedV0(resp.(*kmsg.OffsetFetchResponse).Topics); got != "t:5:NONE" {
				t.Errorf("v%d group d, every topic: %s, want t alone", v, got)
			}
		}
	}
	for _, v := range versions(9) {
		if v < 8 {
			continue
		}
		topic := func(n string) kmsg.OffsetFetchRequestGroupTopic {
			return kmsg.OffsetFetchRequestGroupTopic{Topic: n, TopicID: s.cat.id(n), Partitions: []int32{0}}
		}
		r := at(kmsg.NewPtrOffsetFetchRequest(), v)
		r.Groups = []kmsg.OffsetFetchRequestGroup{
			{Group: "x", Topics: []kmsg.OffsetFetchRequestGroupTopic{topic("t")}},
			{Group: "d"}, // every topic
			{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{topic("t"), topic("secret")}},
			{Group: "d2", Topics: []kmsg.OffsetFetchRequestGroupTopic{topic("secret")}}, // secret alone: answered here
		}
		resp, seen := s.ask(r, 1)
		var got []string
		for _, g := range resp.(*kmsg.OffsetFetchResponse).Groups {
			got = append(got, fmt.Sprintf("%s:%s[%s]", g.Group, ErrorName(g.ErrorCode), s.fetched(v, g.Topics)))
		}
		want := []string{"x:GROUP_AUTHORIZATION_FAILED[]", "d:NONE[t:5:NONE]", "g:NONE[t:5:NONE secret:-1:TOPIC_AUTHORIZATION_FAILED]", "d2:NONE[secret:-1:TOPIC_AUTHORIZATION_FAILED]"}
		if !slices.Equal(got, want) {
			t.Errorf("v%d: %v,\nwant %v", v, got, want)
		}
		if len(seen) == 1 {
			var fwd []string
			for _, g := range seen[0].(*kmsg.OffsetFetchRequest).Groups {
				fwd = append(fwd, fmt.Sprintf("%s:%d", g.Group, len(g.Topics)))
			}
			if fmt.Sprint(fwd) != "[d:0 g:1]" {
				t.Errorf("v%d: forwarded groups %v, want d (every topic) and g with t alone", v, fwd)
			}
		}
	}
}

func fetchedV0(ts []kmsg.OffsetFetchResponseTopic) string {
	var out []string
	for _, t := range ts {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s:%d:%s", t.Topic, p.Offset, ErrorName(p.ErrorCode)))
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func (s *groupACLServer) fetched(v int16, ts []kmsg.OffsetFetchResponseGroupTopic) string {
	var out []string
	for _, t := range ts {
		n := t.Topic
		if v >= 10 {
			n = s.nameOf(t.TopicID)
		}
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s:%d:%s", n, p.Offset, ErrorName(p.ErrorCode)))
		}
	}
	return strings.Join(out, " ")
}

// DescribeGroups and ConsumerGroupDescribe: a group the principal may not
// describe is GROUP_AUTHORIZATION_FAILED, first, and not forwarded; the
// authorized operations are the principal's (not the upstream's answer
// for kfollower); a consumer group assigned a topic the principal may not
// describe is TOPIC_AUTHORIZATION_FAILED without its members.
func TestGroupACLDescribe(t *testing.T) {
	s := newGroupACLServer(t, groupACL+"ALLOW User:ANONYMOUS DESCRIBE GROUP LITERAL gs\n")
	for _, v := range versions(15) {
		r := at(kmsg.NewPtrDescribeGroupsRequest(), v)
		r.Groups, r.IncludeAuthorizedOperations = []string{"d", "x", "g"}, true
		resp, seen := s.ask(r, 1)
		var got []string
		for _, g := range resp.(*kmsg.DescribeGroupsResponse).Groups {
			got = append(got, fmt.Sprintf("%s:%s:%s:%d", g.Group, ErrorName(g.ErrorCode), g.State, g.AuthorizedOperations))
		}
		ops := func(o int32) int32 {
			if v < 3 {
				return -2147483648 // not in the answer before v3
			}
			return o
		}
		want := []string{fmt.Sprintf("x:GROUP_AUTHORIZATION_FAILED::%d", ops(-2147483648)),
			fmt.Sprintf("d:NONE:Stable:%d", ops(aclDescribe)), fmt.Sprintf("g:NONE:Stable:%d", ops(aclRead|aclDescribe))}
		if !slices.Equal(got, want) {
			t.Errorf("DescribeGroups v%d: %v, want %v", v, got, want)
		}
		if len(seen) == 1 && fmt.Sprint(seen[0].(*kmsg.DescribeGroupsRequest).Groups) != "[d g]" {
			t.Errorf("DescribeGroups v%d: forwarded %v, want [d g]", v, seen[0].(*kmsg.DescribeGroupsRequest).Groups)
		}
		r.Groups = []string{"x"}
		resp, _ = s.ask(r, 0)
		if gs := resp.(*kmsg.DescribeGroupsResponse).Groups; len(gs) != 1 || gs[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
			t.Errorf("DescribeGroups v%d of x alone: %+v, want GROUP_AUTHORIZATION_FAILED", v, gs)
		}
	}
	for _, v := range versions(69) {
		r := at(kmsg.NewPtrConsumerGroupDescribeRequest(), v)
		r.Groups, r.IncludeAuthorizedOperations = []string{"g", "x", "gs"}, true
		before := s.denied("DESCRIBE TOPIC")
		resp, seen := s.ask(r, 1)
		var got []string
		for _, g := range resp.(*kmsg.ConsumerGroupDescribeResponse).Groups {
			got = append(got, fmt.Sprintf("%s:%s:%d:%d", g.Group, ErrorName(g.ErrorCode), len(g.Members), g.AuthorizedOperations))
		}
		want := []string{"x:GROUP_AUTHORIZATION_FAILED:0:-2147483648", fmt.Sprintf("g:NONE:1:%d", aclRead|aclDescribe), "gs:TOPIC_AUTHORIZATION_FAILED:0:-2147483648"}
		if !slices.Equal(got, want) {
			t.Errorf("ConsumerGroupDescribe v%d: %v, want %v", v, got, want)
		}
		if len(seen) == 1 && fmt.Sprint(seen[0].(*kmsg.ConsumerGroupDescribeRequest).Groups) != "[g gs]" {
			t.Errorf("ConsumerGroupDescribe v%d: forwarded %v, want [g gs]", v, seen[0].(*kmsg.ConsumerGroupDescribeRequest).Groups)
		}
		if n := s.denied("DESCRIBE TOPIC") - before; n != 1 {
			t.Errorf("ConsumerGroupDescribe v%d: %d DESCRIBE TOPIC denials, want 1 (secret)", v, n)
		}
	}
}

// ListGroups lists only the groups the principal may describe, without
// a denial counted, unless it may describe the cluster: then all.
func TestGroupACLListGroups(t *testing.T) {
	for _, tc := range []struct {
		acl  string
		want string
	}{
		{groupACL, "[g d]"},
		{groupACL + "ALLOW User:ANONYMOUS DESCRIBE CLUSTER LITERAL kafka-cluster\n", "[g d x]"},
	} {
		s := newGroupACLServer(t, tc.acl)
		for _, v := range versions(16) {
			resp, _ := s.ask(at(kmsg.NewPtrListGroupsRequest(), v), 1)
			var got []string
			for _, g := range resp.(*kmsg.ListGroupsResponse).Groups {
				got = append(got, g.Group)
			}
			if fmt.Sprint(got) != tc.want {
				t.Errorf("v%d: listed %v, want %s", v, got, tc.want)
			}
		}
		if n := s.denied("DESCRIBE GROUP") + s.denied("DESCRIBE CLUSTER"); n != 0 {
			t.Errorf("ListGroups counted %d denials, want none (logIfDenied = false)", n)
		}
	}
}

// TestGroupErrorsLabelled: the serve metrics label a group API's answer by
// the error it carries, so a denial is not counted as NONE.
func TestGroupErrorsLabelled(t *testing.T) {
	denied := kerr.GroupAuthorizationFailed.Code
	join := kmsg.NewPtrJoinGroupResponse()
	join.ErrorCode = denied
	commit := kmsg.NewPtrOffsetCommitResponse()
	ct := kmsg.NewOffsetCommitResponseTopic()
	cp := kmsg.NewOffsetCommitResponseTopicPartition()
	cp.ErrorCode = denied
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	fetch := kmsg.NewPtrOffsetFetchResponse()
	fg := kmsg.NewOffsetFetchResponseGroup()
	fg.ErrorCode = denied
	fetch.Groups = append(fetch.Groups, fg)
	describe := kmsg.NewPtrDescribeGroupsResponse()
	dg := kmsg.NewDescribeGroupsResponseGroup()
	dg.ErrorCode = denied
	describe.Groups = append(describe.Groups, dg)
	hb := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	hb.ErrorCode = denied
	for _, resp := range []kmsg.Response{join, commit, fetch, describe, hb} {
		if got := errorCode(resp); got != denied {
			t.Errorf("%s: labelled %s, want GROUP_AUTHORIZATION_FAILED", kmsg.NameForKey(resp.Key()), ErrorName(got))
		}
	}
}
