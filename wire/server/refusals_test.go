package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Writes are refused at every version, as Kafka refuses a principal that
// may only read, and the log is left as it was.
func TestProduceRefused(t *testing.T) {
	cat := newCatalog()
	cat.add("t", 1, 2)
	l := openLog(t, "t", 0, false, run(0, 0, 1, 1))
	cat.serve("t", 0, l, 0)
	_, addr := testServer(t, cat)
	c := dial(t, addr)
	for _, v := range versions(0) {
		for _, txn := range []*string{nil, kmsg.StringPtr("tx")} {
			req := at(kmsg.NewPtrProduceRequest(), v)
			req.Acks = -1
			if v >= 3 {
				req.TransactionID = txn
			} else if txn != nil {
				continue
			}
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic, rt.TopicID = "t", cat.id("t")
			for p := range int32(3) { // 2 is no partition at all: refused the same
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition, rp.Records = p, run(1, 0, 1, 1)
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			resp := c.do(req).(*kmsg.ProduceResponse)
			want := kerr.TopicAuthorizationFailed
			if txn != nil {
				want = kerr.TransactionalIDAuthorizationFailed
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
				t.Fatalf("v%d: %+v", v, resp)
			}
			if v >= 13 && resp.Topics[0].TopicID != cat.id("t") || v < 13 && resp.Topics[0].Topic != "t" {
				t.Errorf("v%d: topic %q %x", v, resp.Topics[0].Topic, resp.Topics[0].TopicID)
			}
			for i, p := range resp.Topics[0].Partitions {
				if p.Partition != int32(i) || p.ErrorCode != want.Code || p.BaseOffset != -1 {
					t.Errorf("v%d: partition %+v, want %v", v, p, want)
				}
				if v >= 8 && (p.ErrorMessage == nil || *p.ErrorMessage != readOnly) {
					t.Errorf("v%d: message %v", v, p.ErrorMessage)
				}
			}
		}
	}
	if l.LogEndOffset() != 1 {
		t.Errorf("log end %d after refused writes, want 1", l.LogEndOffset())
	}
}

func TestInitProducerIDRefused(t *testing.T) {
	_, addr := testServer(t, newCatalog())
	c := dial(t, addr)
	for _, v := range versions(22) {
		for _, tc := range []struct {
			txn  *string
			want *kerr.Error
		}{
			{nil, kerr.ClusterAuthorizationFailed},
			{kmsg.StringPtr("tx"), kerr.TransactionalIDAuthorizationFailed},
		} {
			req := at(kmsg.NewPtrInitProducerIDRequest(), v)
			req.TransactionalID = tc.txn
			resp := c.do(req).(*kmsg.InitProducerIDResponse)
			if resp.ErrorCode != tc.want.Code || resp.ProducerID != -1 || resp.ProducerEpoch != -1 {
				t.Errorf("v%d txn %v: %+v, want %v", v, tc.txn, resp, tc.want)
			}
		}
	}
}

func TestFindCoordinatorRefused(t *testing.T) {
	_, addr := testServer(t, newCatalog())
	c := dial(t, addr)
	for _, v := range versions(10) {
		for _, tc := range []struct {
			typ  int8
			want *kerr.Error
		}{
			{0, kerr.GroupAuthorizationFailed},
			{1, kerr.TransactionalIDAuthorizationFailed},
			{2, kerr.GroupAuthorizationFailed},
			{9, kerr.InvalidRequest},
		} {
			if v == 0 && tc.typ != 0 {
				continue // CoordinatorType is v1+
			}
			req := at(kmsg.NewPtrFindCoordinatorRequest(), v)
			req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = tc.typ, "g", []string{"g1", "g2"}
			resp := c.do(req).(*kmsg.FindCoordinatorResponse)
			if v < 4 {
				if resp.ErrorCode != tc.want.Code || resp.NodeID != -1 || v >= 1 && (resp.ErrorMessage == nil || *resp.ErrorMessage != noCoordinator) {
					t.Errorf("v%d type %d: %+v, want %v", v, tc.typ, resp, tc.want)
				}
				continue
			}
			if len(resp.Coordinators) != 2 {
				t.Fatalf("v%d: %d coordinators", v, len(resp.Coordinators))
			}
			for i, co := range resp.Coordinators {
				if co.Key != req.CoordinatorKeys[i] || co.ErrorCode != tc.want.Code || co.NodeID != -1 || co.ErrorMessage == nil {
					t.Errorf("v%d type %d: %+v, want %v", v, tc.typ, co, tc.want)
				}
			}
		}
	}
}
