package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeGroups answers group requests itself and records what the server
// asked.
type fakeGroups struct {
	mu     sync.Mutex
	lookup map[string]error // Coordinator's answer per group; absent: nil
	opened int
	closed int
	seen   []string // "key vN" forwarded
}

func (g *fakeGroups) Versions(key int16) (int16, int16, bool) {
	switch key {
	case 11: // JoinGroup: as an upstream that takes v2-v7
		return 2, 7, true
	case 69: // ConsumerGroupDescribe: not upstream
		return 0, 0, false
	}
	return 0, kmsg.RequestForKey(key).MaxVersion(), true
}

func (g *fakeGroups) Coordinator(_ context.Context, group string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lookup[group]
}

func (g *fakeGroups) Open() GroupSession {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.opened++
	return fakeSession{g}
}

type fakeSession struct{ g *fakeGroups }

func (s fakeSession) Forward(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	s.g.mu.Lock()
	s.g.seen = append(s.g.seen, fmt.Sprintf("%d v%d", req.Key(), req.GetVersion()))
	s.g.mu.Unlock()
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if hb, ok := resp.(*kmsg.HeartbeatResponse); ok {
		hb.ErrorCode = kerr.RebalanceInProgress.Code
	}
	return resp, nil
}

func (s fakeSession) Close() {
	s.g.mu.Lock()
	s.g.closed++
	s.g.mu.Unlock()
}

func (g *fakeGroups) counts() (opened, closed int, seen []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.opened, g.closed, append([]string(nil), g.seen...)
}

// With Config.Groups, FindCoordinator names this broker for a consumer
// group the upstream has a coordinator for, passes on the upstream's
// refusal, answers COORDINATOR_NOT_AVAILABLE when it cannot look, and
// still refuses transactional ids and share groups; every key of a v4+
// batch on its own.
func TestFindCoordinatorWithGroups(t *testing.T) {
	g := &fakeGroups{lookup: map[string]error{
		"denied": fmt.Errorf("the upstream cluster has no coordinator for group %q: %w", "denied", kerr.GroupAuthorizationFailed),
		"away":   errors.New("kfollower cannot reach the upstream cluster"),
	}}
	_, addr := testServer(t, newCatalog(), func(c *Config) { c.Groups, c.Advertise = g, "kf.example:9093" })
	c := dial(t, addr)
	type want struct {
		code int16
		self bool
	}
	cases := []struct {
		typ int8
		key string
		want
	}{
		{0, "g", want{0, true}},
		{0, "denied", want{kerr.GroupAuthorizationFailed.Code, false}},
		{0, "away", want{kerr.CoordinatorNotAvailable.Code, false}},
		{1, "tx", want{kerr.TransactionalIDAuthorizationFailed.Code, false}},
		{2, "share", want{kerr.GroupAuthorizationFailed.Code, false}},
	}
	check := func(v int16, key string, w want, code int16, msg *string, node, port int32, host string) {
		t.Helper()
		if code != w.code {
			t.Errorf("v%d %q: %v, want %v", v, key, kerr.ErrorForCode(code), kerr.ErrorForCode(w.code))
		}
		if w.self && (node != 7 || host != "kf.example" || port != 9093) {
			t.Errorf("v%d %q: coordinator %d at %s:%d, want this broker (7 at kf.example:9093)", v, key, node, host, port)
		}
		if !w.self && (node != -1 || v >= 1 && msg == nil) {
			t.Errorf("v%d %q: node %d message %v, want -1 and a message", v, key, node, msg)
		}
	}
	for _, v := range versions(10) {
		if v < 4 {
			for _, tc := range cases {
				if v == 0 && tc.typ != 0 {
					continue
				}
				req := at(kmsg.NewPtrFindCoordinatorRequest(), v)
				req.CoordinatorType, req.CoordinatorKey = tc.typ, tc.key
				r := c.do(req).(*kmsg.FindCoordinatorResponse)
				check(v, tc.key, tc.want, r.ErrorCode, r.ErrorMessage, r.NodeID, r.Port, r.Host)
			}
			continue
		}
		req := at(kmsg.NewPtrFindCoordinatorRequest(), v)
		req.CoordinatorKeys = []string{"g", "denied", "away"}
		r := c.do(req).(*kmsg.FindCoordinatorResponse)
		if len(r.Coordinators) != 3 {
			t.Fatalf("v%d: %d coordinators, want 3", v, len(r.Coordinators))
		}
		for i, co := range r.Coordinators {
			if co.Key != req.CoordinatorKeys[i] {
				t.Fatalf("v%d: coordinator %d is %q, want %q", v, i, co.Key, req.CoordinatorKeys[i])
			}
			check(v, co.Key, cases[i].want, co.ErrorCode, co.ErrorMessage, co.NodeID, co.Port, co.Host)
		}
	}
}

// ApiVersions lists the group keys only with Config.Groups, in its
// ranges; group requests go to the connection's one session, opened on
// the first and closed with the connection; without Config.Groups a group
// request closes the connection, as a key not served does.
func TestGroupsForwarded(t *testing.T) {
	g := &fakeGroups{}
	_, addr := testServer(t, newCatalog(), func(c *Config) { c.Groups = g })
	c := dial(t, addr)
	av := c.do(at(kmsg.NewPtrApiVersionsRequest(), 2)).(*kmsg.ApiVersionsResponse)
	got := map[int16][2]int16{}
	for _, k := range av.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if r := got[11]; r != [2]int16{2, 7} {
		t.Errorf("JoinGroup advertised %v, want v2-v7 (Groups.Versions)", r)
	}
	if _, ok := got[69]; ok {
		t.Error("ConsumerGroupDescribe advertised, which Groups does not forward")
	}
	for _, k := range groupKeys {
		if _, ok := got[k]; !ok && k != 69 {
			t.Errorf("%s not advertised", kmsg.NameForKey(k))
		}
	}
	hb := at(kmsg.NewPtrHeartbeatRequest(), 4)
	hb.Group = "g"
	if r := c.do(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("Heartbeat: %v, want the session's answer", kerr.ErrorForCode(r.ErrorCode))
	}
	oc := at(kmsg.NewPtrOffsetCommitRequest(), 9)
	oc.Group = "g"
	c.do(oc)
	if opened, closed, seen := g.counts(); opened != 1 || closed != 0 || fmt.Sprint(seen) != "[12 v4 8 v9]" {
		t.Fatalf("opened %d closed %d forwarded %v, want one session with Heartbeat v4 and OffsetCommit v9", opened, closed, seen)
	}
	c.c.Close()
	waitFor(t, func() bool { _, closed, _ := g.counts(); return closed == 1 })

	_, off := testServer(t, newCatalog())
	oc2 := dial(t, off)
	av = oc2.do(at(kmsg.NewPtrApiVersionsRequest(), 2)).(*kmsg.ApiVersionsResponse)
	for _, k := range av.ApiKeys {
		if isGroupKey(k.ApiKey) {
			t.Errorf("without Config.Groups, %s advertised", kmsg.NameForKey(k.ApiKey))
		}
	}
	oc2.send(hb)
	oc2.closed()
}
