package groups

import (
	"context"
	"fmt"
	"time"

	"github.com/kfollower/kfollower/wire/server"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// session is one client connection's forwarding. The server calls Forward
// from the connection's one goroutine, one request at a time, and Close
// from the same goroutine at its end.
type session struct {
	f  *Forwarder
	cl *kgo.Client // made on the first request that goes upstream
	// rebalance is the last JoinGroup's rebalance timeout: the
	// coordinator may hold the SyncGroup that follows as long.
	rebalance time.Duration
}

// Open starts a session for one client connection.
func (f *Forwarder) Open() server.GroupSession { return &session{f: f, rebalance: defaultRebalance} }

func (s *session) Close() {
	if s.cl != nil {
		s.cl.Close()
		s.cl = nil
	}
}

// Forward sends req to its group's coordinator upstream and returns the
// answer, or an answer of kfollower's own (COORDINATOR_NOT_AVAILABLE) when
// the upstream cannot be reached.
func (s *session) Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	start := time.Now()
	resp, reached, err := s.forward(ctx, req)
	if err != nil {
		return nil, err
	}
	code := int16(0)
	if cs := codes(resp); len(cs) > 0 {
		code = cs[0]
	}
	s.f.obs.Forwarded(kmsg.NameForKey(req.Key()), server.ErrorName(code), reached, time.Since(start))
	if reached {
		s.f.reachable()
	}
	return resp, nil
}

func (s *session) forward(ctx context.Context, req kmsg.Request) (kmsg.Response, bool, error) {
	if msg, ok := s.f.unsupported(req); !ok {
		return failed(req, kerr.UnsupportedVersion.Code, msg), true, nil
	}
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		s.rebalance = time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
		if r.Version == 0 {
			s.rebalance = time.Duration(r.SessionTimeoutMillis) * time.Millisecond
		}
		resp, ok := s.one(ctx, r.Group, req, s.rebalance)
		return resp, ok, nil
	case *kmsg.SyncGroupRequest:
		resp, ok := s.one(ctx, r.Group, req, s.rebalance)
		return resp, ok, nil
	case *kmsg.HeartbeatRequest:
		resp, ok := s.one(ctx, r.Group, req, 0)
		return resp, ok, nil
	case *kmsg.LeaveGroupRequest:
		resp, ok := s.one(ctx, r.Group, req, 0)
		return resp, ok, nil
	case *kmsg.ConsumerGroupHeartbeatRequest:
		resp, ok := s.one(ctx, r.Group, req, 0)
		return resp, ok, nil
	case *kmsg.OffsetCommitRequest:
		s.f.checkCommit(r)
		resp, ok := s.one(ctx, r.Group, req, 0)
		return resp, ok, nil
	case *kmsg.OffsetFetchRequest:
		if r.Version < 8 {
			resp, ok := s.one(ctx, r.Group, req, 0)
			return resp, ok, nil
		}
		resp, ok := s.offsetFetch(ctx, r)
		return resp, ok, nil
	case *kmsg.DescribeGroupsRequest:
		resp, ok := s.describeGroups(ctx, r)
		return resp, ok, nil
	case *kmsg.ConsumerGroupDescribeRequest:
		resp, ok := s.consumerGroupDescribe(ctx, r)
		return resp, ok, nil
	case *kmsg.ListGroupsRequest:
		resp, ok := s.listGroups(ctx, r)
		return resp, ok, nil
	}
	return nil, false, fmt.Errorf("groups: %s is not a group request", kmsg.NameForKey(req.Key()))
}

// unsupported refuses a version the upstream does not take (a client that
// negotiated before the upstream changed): kgo would send it at another
// version, and the answer would not be the one the client asked for.
func (f *Forwarder) unsupported(req kmsg.Request) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.versions == nil {
		return "", true
	}
	r, ok := f.versions[req.Key()]
	if v := req.GetVersion(); !ok || v < r.min || v > r.max {
		return fmt.Sprintf("the upstream cluster does not take %s v%d", kmsg.NameForKey(req.Key()), v), false
	}
	return "", true
}

// one forwards a request of one group to its coordinator. A failure to
// reach it forgets the coordinator and answers COORDINATOR_NOT_AVAILABLE;
// the upstream's own NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE forgets
// it too, and the client, told so, finds it again (AbstractCoordinator,
// kgo's group consumer).
func (s *session) one(ctx context.Context, group string, req kmsg.Request, wait time.Duration) (kmsg.Response, bool) {
	node, code, reached, err := s.f.coordinator(ctx, group)
	if err != nil {
		return failed(req, code, err.Error()), reached
	}
	resp, err := s.send(ctx, node, req, wait)
	if err != nil {
		s.f.forget(group, node)
		if ctx.Err() == nil { // not the server shutting down
			s.f.unreachable(kmsg.NameForKey(req.Key()), err)
		}
		return failed(req, kerr.CoordinatorNotAvailable.Code, unreachableMsg(node, err)), false
	}
	if movedCoordinator(resp) {
		s.f.forget(group, node)
	}
	return resp, true
}

func unreachableMsg(node int32, err error) string {
	return fmt.Sprintf("kfollower cannot reach the upstream coordinator (broker %d): %v", node, err)
}

// movedCoordinator reports an answer saying the coordinator is elsewhere
// or not ready (CoordinatorLoadInProgress is the right coordinator,
// loading: kept).
func movedCoordinator(resp kmsg.Response) bool {
	for _, c := range codes(resp) {
		if c == kerr.NotCoordinator.Code || c == kerr.CoordinatorNotAvailable.Code {
			return true
		}
	}
	return false
}

// pinned sends a request at the version the client chose: kgo sends at
// the highest version both it (MaxVersion) and the broker take. It is a
// TimeoutRequest so that kgo waits for the answer as long as the
// coordinator may hold it (connTimeouter adds Timeout to its overhead);
// kgo's own waits for JoinGroup and SyncGroup look at their types, which
// the wrapper hides.
type pinned struct {
	kmsg.Request
	timeoutMillis int32
}

func (p *pinned) MaxVersion() int16 { return p.Request.GetVersion() }
func (p *pinned) Timeout() int32    { return p.timeoutMillis }

// send sends req to upstream broker node on this session's client.
func (s *session) send(ctx context.Context, node int32, req kmsg.Request, wait time.Duration) (kmsg.Response, error) {
	if s.cl == nil {
		cl, err := kgo.NewClient(s.f.clientOpts()...)
		if err != nil {
			return nil, fmt.Errorf("creating an upstream client: %w", err)
		}
		s.cl = cl
	}
	v := req.GetVersion()
	resp, err := s.cl.Broker(int(node)).Request(ctx, &pinned{Request: req, timeoutMillis: int32(wait.Milliseconds())})
	if err != nil {
		return nil, err
	}
	if req.GetVersion() != v {
		// Never with the versions advertised; a broker downgraded
		// since (unsupported) would need this.
		req.SetVersion(v)
		resp.SetVersion(v)
	}
	return resp, nil
}

// byCoordinator splits groups by upstream coordinator, in first-seen
// order; the groups whose coordinator cannot be found get fail's answer.
func (s *session) byCoordinator(ctx context.Context, groups []string, fail func(group string, code int16, msg string)) (nodes []int32, of map[int32][]string, reached bool) {
	of = map[int32][]string{}
	reached = true
	for _, g := range groups {
		node, code, ok, err := s.f.coordinator(ctx, g)
		if err != nil {
			reached = reached && ok
			fail(g, code, err.Error())
			continue
		}
		if _, seen := of[node]; !seen {
			nodes = append(nodes, node)
		}
		of[node] = append(of[node], g)
	}
	return nodes, of, reached
}

// sendShard sends a request for groups on node; a failure forgets those
// groups' coordinator and fails them.
func (s *session) sendShard(ctx context.Context, node int32, groups []string, req kmsg.Request, fail func(group string, code int16, msg string)) (kmsg.Response, bool) {
	resp, err := s.send(ctx, node, req, 0)
	if err != nil {
		if ctx.Err() == nil {
			s.f.unreachable(kmsg.NameForKey(req.Key()), err)
		}
		for _, g := range groups {
			s.f.forget(g, node)
			fail(g, kerr.CoordinatorNotAvailable.Code, unreachableMsg(node, err))
		}
		return nil, false
	}
	return resp, true
}

// sharded is how one request type that names several groups splits and
// merges; G is one group's answer.
type sharded[G any] struct {
	// request is the request for some of the groups.
	request func(groups []string) kmsg.Request
	// answers are a response's groups and its throttle.
	answers func(kmsg.Response) ([]G, int32)
	// group and code read one answer.
	group func(G) string
	code  func(G) int16
	// failed is kfollower's own answer for a group.
	failed func(group string, code int16, msg string) G
}

// forwardSharded sends each coordinator the groups it coordinates and
// merges the answers in the order of names; the answers for groups whose
// coordinator is not found or cannot be reached are kfollower's own.
func forwardSharded[G any](ctx context.Context, s *session, names []string, sh sharded[G]) (out []G, throttle int32, reached bool) {
	got := map[string]G{}
	fail := func(g string, code int16, msg string) { got[g] = sh.failed(g, code, msg) }
	nodes, of, reached := s.byCoordinator(ctx, names, fail)
	for _, node := range nodes {
		resp, ok := s.sendShard(ctx, node, of[node], sh.request(of[node]), fail)
		reached = reached && ok
		if !ok {
			continue
		}
		answers, th := sh.answers(resp)
		throttle = max(throttle, th)
		for _, a := range answers {
			if c := sh.code(a); c == kerr.NotCoordinator.Code || c == kerr.CoordinatorNotAvailable.Code {
				s.f.forget(sh.group(a), node)
			}
			got[sh.group(a)] = a
		}
	}
	for _, g := range names {
		if a, ok := got[g]; ok {
			out = append(out, a)
			delete(got, g)
		}
	}
	return out, throttle, reached
}

func (s *session) describeGroups(ctx context.Context, r *kmsg.DescribeGroupsRequest) (kmsg.Response, bool) {
	out := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	var reached bool
	out.Groups, out.ThrottleMillis, reached = forwardSharded(ctx, s, r.Groups, sharded[kmsg.DescribeGroupsResponseGroup]{
		request: func(gs []string) kmsg.Request { sub := *r; sub.Groups = gs; return &sub },
		answers: func(resp kmsg.Response) ([]kmsg.DescribeGroupsResponseGroup, int32) {
			dr := resp.(*kmsg.DescribeGroupsResponse)
			return dr.Groups, dr.ThrottleMillis
		},
		group: func(d kmsg.DescribeGroupsResponseGroup) string { return d.Group },
		code:  func(d kmsg.DescribeGroupsResponseGroup) int16 { return d.ErrorCode },
		failed: func(g string, code int16, msg string) kmsg.DescribeGroupsResponseGroup {
			d := kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.ErrorCode, d.ErrorMessage = g, code, kmsg.StringPtr(msg)
			return d
		},
	})
	return out, reached
}

func (s *session) consumerGroupDescribe(ctx context.Context, r *kmsg.ConsumerGroupDescribeRequest) (kmsg.Response, bool) {
	out := r.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	var reached bool
	out.Groups, out.ThrottleMillis, reached = forwardSharded(ctx, s, r.Groups, sharded[kmsg.ConsumerGroupDescribeResponseGroup]{
		request: func(gs []string) kmsg.Request { sub := *r; sub.Groups = gs; return &sub },
		answers: func(resp kmsg.Response) ([]kmsg.ConsumerGroupDescribeResponseGroup, int32) {
			dr := resp.(*kmsg.ConsumerGroupDescribeResponse)
			return dr.Groups, dr.ThrottleMillis
		},
		group: func(d kmsg.ConsumerGroupDescribeResponseGroup) string { return d.Group },
		code:  func(d kmsg.ConsumerGroupDescribeResponseGroup) int16 { return d.ErrorCode },
		failed: func(g string, code int16, msg string) kmsg.ConsumerGroupDescribeResponseGroup {
			d := kmsg.NewConsumerGroupDescribeResponseGroup()
			d.Group, d.ErrorCode, d.ErrorMessage = g, code, kmsg.StringPtr(msg)
			return d
		},
	})
	return out, reached
}

// offsetFetch is OffsetFetch v8+, which names several groups (KIP-709).
func (s *session) offsetFetch(ctx context.Context, r *kmsg.OffsetFetchRequest) (kmsg.Response, bool) {
	out := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	names := make([]string, len(r.Groups))
	reqOf := map[string]kmsg.OffsetFetchRequestGroup{}
	for i, g := range r.Groups {
		names[i] = g.Group
		reqOf[g.Group] = g
	}
	var reached bool
	out.Groups, out.ThrottleMillis, reached = forwardSharded(ctx, s, names, sharded[kmsg.OffsetFetchResponseGroup]{
		request: func(gs []string) kmsg.Request {
			sub := *r
			sub.Groups = nil
			for _, g := range gs {
				sub.Groups = append(sub.Groups, reqOf[g])
			}
			return &sub
		},
		answers: func(resp kmsg.Response) ([]kmsg.OffsetFetchResponseGroup, int32) {
			fr := resp.(*kmsg.OffsetFetchResponse)
			return fr.Groups, fr.ThrottleMillis
		},
		group: func(d kmsg.OffsetFetchResponseGroup) string { return d.Group },
		code:  func(d kmsg.OffsetFetchResponseGroup) int16 { return d.ErrorCode },
		failed: func(g string, code int16, _ string) kmsg.OffsetFetchResponseGroup {
			d := kmsg.NewOffsetFetchResponseGroup() // no message field
			d.Group, d.ErrorCode = g, code
			return d
		},
	})
	return out, reached
}

// listGroups asks every upstream broker, each of which lists the groups
// it coordinates (as Kafka's AdminClient.listConsumerGroups does), and
// merges the lists. A broker that cannot be reached makes the answer
// COORDINATOR_NOT_AVAILABLE, with what the others listed.
func (s *session) listGroups(ctx context.Context, r *kmsg.ListGroupsRequest) (kmsg.Response, bool) {
	out := r.ResponseKind().(*kmsg.ListGroupsResponse)
	ids, err := s.f.brokers(ctx)
	if err != nil {
		s.f.unreachable("ListGroups", err)
		out.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return out, false
	}
	reached := true
	for _, id := range ids {
		sub := *r
		resp, err := s.send(ctx, id, &sub, 0)
		if err != nil {
			s.f.unreachable("ListGroups", err)
			reached = false
			out.ErrorCode = kerr.CoordinatorNotAvailable.Code
			continue
		}
		lr := resp.(*kmsg.ListGroupsResponse)
		out.ThrottleMillis = max(out.ThrottleMillis, lr.ThrottleMillis)
		if out.ErrorCode == 0 {
			out.ErrorCode = lr.ErrorCode
		}
		out.Groups = append(out.Groups, lr.Groups...)
	}
	return out, reached
}

// checkCommit counts the partitions an OffsetCommit commits above what
// kfollower serves of them: not from records it served, but the cluster
// owns group state, so the commit is forwarded unchanged.
func (f *Forwarder) checkCommit(r *kmsg.OffsetCommitRequest) {
	if f.cfg.Catalog == nil {
		return
	}
	for _, t := range r.Topics {
		name := t.Topic
		if r.Version >= 10 {
			var ok bool
			if name, ok = f.cfg.Catalog.TopicName(t.TopicID); !ok {
				continue
			}
		}
		for _, p := range t.Partitions {
			if hw, ok := f.cfg.Catalog.HighWatermark(name, p.Partition); ok && p.Offset > hw {
				f.obs.CommitAboveWatermark(name)
				f.log.Debug("an OffsetCommit above the served high watermark, forwarded unchanged",
					"group", r.Group, "topic", name, "partition", p.Partition, "offset", p.Offset, "high_watermark", hw)
			}
		}
	}
}
