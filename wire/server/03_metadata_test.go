package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// describe renders a Metadata answer's topics as one line each.
func describe(m *kmsg.MetadataResponse) []string {
	var out []string
	for _, t := range m.Topics {
		name := "<nil>"
		if t.Topic != nil {
			name = *t.Topic
		}
		s := fmt.Sprintf("%s id=%02x%02x err=%d", name, t.TopicID[0], t.TopicID[15], t.ErrorCode)
		for _, p := range t.Partitions {
			s += fmt.Sprintf(" [%d err=%d leader=%d epoch=%d replicas=%v isr=%v offline=%v]",
				p.Partition, p.ErrorCode, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, p.OfflineReplicas)
		}
		out = append(out, s)
	}
	return out
}

func TestMetadata(t *testing.T) {
	cat := newCatalog()
	cat.add("b", 2, 2)
	cat.add("a", 1, 1)
	cat.serve("a", 0, openLog(t, "a", 0, false, run(0, 4, 1, 1)), 6)
	cat.serve("b", 0, openLog(t, "b", 0, false), 2)
	_, addr := testServer(t, cat)
	c := dial(t, addr)
	a0 := "a id=0101 err=0 [0 err=0 leader=7 epoch=6 replicas=[7] isr=[7] offline=[]]"
	b := "b id=0202 err=0 [0 err=0 leader=7 epoch=2 replicas=[7] isr=[7] offline=[]] [1 err=5 leader=-1 epoch=-1 replicas=[7] isr=[] offline=[7]]"
	named := func(v int16, names ...string) *kmsg.MetadataRequest {
		r := at(kmsg.NewPtrMetadataRequest(), v)
		r.Topics = []kmsg.MetadataRequestTopic{}
		for _, n := range names {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	byID := func(ids ...[16]byte) *kmsg.MetadataRequest {
		r := at(kmsg.NewPtrMetadataRequest(), 12)
		for _, id := range ids {
			rt := kmsg.NewMetadataRequestTopic()
			rt.TopicID = id
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	all := at(kmsg.NewPtrMetadataRequest(), 12)
	all.Topics = nil
	withOps := named(12, "a")
	withOps.IncludeTopicAuthorizedOperations = true
	for _, tc := range []struct {
		name     string
		req      *kmsg.MetadataRequest
		from, to int16 // the versions the case applies to
		want     []string
	}{
		{"null is all", all, 1, 13, []string{a0, b}},
		{"v0: empty is all", named(0), 0, 0, []string{a0, b}},
		{"v1+: empty is none", named(1), 1, 13, nil},
		{"by name", named(12, "b"), 0, 13, []string{b}},
		{"unknown name: never created", named(12, "nope", "a"), 0, 13, []string{"nope id=0000 err=3", a0}},
		{"by id", byID(cat.id("b")), 12, 13, []string{b}},
		{"unknown id", byID([16]byte{9, 15: 9}), 12, 13, []string{"<nil> id=0909 err=100"}},
		{"authorized operations", withOps, 0, 13, []string{a0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for v := tc.from; v <= tc.to; v++ {
				req := *tc.req
				req.Version = v
				m := c.do(&req).(*kmsg.MetadataResponse)
				want := slices.Clone(tc.want)
				for i := range want {
					if v < 5 { // OfflineReplicas is v5+
						want[i] = strings.ReplaceAll(want[i], "offline=[7]", "offline=[]")
					}
					if v < 7 { // LeaderEpoch is v7+
						want[i] = strings.NewReplacer("epoch=6", "epoch=-1", "epoch=2", "epoch=-1").Replace(want[i])
					}
					if v < 10 { // TopicID is v10+
						want[i] = strings.NewReplacer("id=0101", "id=0000", "id=0202", "id=0000").Replace(want[i])
					}
				}
				if got := describe(m); !slices.Equal(got, want) {
					t.Errorf("v%d:\n got %q\nwant %q", v, got, want)
				}
				if len(m.Brokers) != 1 || m.Brokers[0].NodeID != 7 || m.Brokers[0].Port <= 0 {
					t.Errorf("v%d: brokers %+v", v, m.Brokers)
				}
				if v >= 1 && m.ControllerID != 7 {
					t.Errorf("v%d: controller %d", v, m.ControllerID)
				}
				if v >= 2 && (m.ClusterID == nil || *m.ClusterID != "kfollower-test") {
					t.Errorf("v%d: cluster id %v", v, m.ClusterID)
				}
				if req.IncludeTopicAuthorizedOperations && v >= 8 && m.Topics[0].AuthorizedOperations != 1<<3|1<<8 {
					t.Errorf("v%d: topic operations %b, want READ|DESCRIBE", v, m.Topics[0].AuthorizedOperations)
				}
			}
		})
	}
	ops := at(kmsg.NewPtrMetadataRequest(), 10)
	ops.IncludeClusterAuthorizedOperations = true
	if m := c.do(ops).(*kmsg.MetadataResponse); m.AuthorizedOperations != 1<<8 {
		t.Errorf("cluster operations %b, want DESCRIBE", m.AuthorizedOperations)
	}
}
