package server

import (
	"context"
	"slices"
	"strings"

	"github.com/kfollower/kfollower/authz"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata (key 3): v0-13. Broker side: KafkaApis.handleTopicMetadataRequest
// and KRaftMetadataCache.getTopicMetadata.
//
//   - This server is the only broker and the controller, at the advertised
//     address.
//   - Every served partition is led by this broker with the served epoch
//     (v7+), replicas = ISR = [self]; a partition of a served topic that the
//     Catalog does not serve yet is LEADER_NOT_AVAILABLE with leader -1 and
//     this broker offline for it.
//   - Topics carry the upstream topic ids (v10+); v10+ may ask by id, an
//     unknown id is UNKNOWN_TOPIC_ID.
//   - An unknown topic is UNKNOWN_TOPIC_OR_PARTITION: nothing is ever
//     created (AllowAutoTopicCreation is ignored).
//   - Authorized operations (v8+, when asked): READ and DESCRIBE on topics,
//     DESCRIBE on the cluster, as for a principal that may only consume;
//     under an Authorizer, those the principal is granted.
//   - Under an Authorizer only topics the principal may DESCRIBE are
//     answered (authorize.go).

func init() { register(3, 0, handleMetadata) }

// AclOperation codes (AclOperation.java) as KIP-430 bit positions.
const (
	aclRead     = 1 << 3
	aclDescribe = 1 << 8
)

func handleMetadata(_ context.Context, cc *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	cfg := cc.s.cfg

	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = cfg.NodeID, cc.adv.host, cc.adv.port
	resp.Brokers = []kmsg.MetadataResponseBroker{b}
	clusterID := cfg.ClusterID
	resp.ClusterID = &clusterID
	resp.ControllerID = cfg.NodeID
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = cc.clusterOperations()
	}
	describe := cc.topicAuth(authz.Describe)

	topics := cfg.Catalog.Topics()
	slices.SortFunc(topics, func(a, b Topic) int { return strings.Compare(a.Name, b.Name) })
	all := req.Topics == nil || req.Version == 0 && len(req.Topics) == 0
	if all {
		for _, t := range topics {
			if cc.s.cfg.Authorizer == nil || cc.authorized(authz.Describe, authz.Topic, t.Name, true) {
				resp.Topics = append(resp.Topics, cc.topicMetadata(req, t))
			}
		}
		return resp, nil
	}
	byName := make(map[string]Topic, len(topics))
	byID := make(map[[16]byte]Topic, len(topics))
	for _, t := range topics {
		byName[t.Name] = t
		byID[t.ID] = t
	}
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			if t, ok := byID[rt.TopicID]; ok && rt.TopicID != ([16]byte{}) {
				if !describe.ok(t.Name) {
					mt := kmsg.NewMetadataResponseTopic()
					mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
					mt.TopicID = rt.TopicID
					resp.Topics = append(resp.Topics, mt)
					continue
				}
				resp.Topics = append(resp.Topics, cc.topicMetadata(req, t))
				continue
			}
			mt := kmsg.NewMetadataResponseTopic()
			mt.ErrorCode = kerr.UnknownTopicID.Code
			mt.TopicID = rt.TopicID
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		if !describe.ok(*rt.Topic) {
			mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			mt.Topic = kmsg.StringPtr(*rt.Topic)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		if t, ok := byName[*rt.Topic]; ok {
			resp.Topics = append(resp.Topics, cc.topicMetadata(req, t))
			continue
		}
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		mt.Topic = kmsg.StringPtr(*rt.Topic)
		resp.Topics = append(resp.Topics, mt)
	}
	return resp, nil
}

func (cc *conn) topicMetadata(req *kmsg.MetadataRequest, t Topic) kmsg.MetadataResponseTopic {
	s := cc.s
	self := s.cfg.NodeID
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.TopicID = t.ID
	if req.Version >= 8 && req.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = cc.topicOperations(t.Name)
	}
	for p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		mp.Replicas = []int32{self}
		if part, ok := s.lookup(t.Name, p); ok {
			mp.Leader = self
			mp.LeaderEpoch = part.epoch
			mp.ISR = []int32{self}
			mp.OfflineReplicas = []int32{}
		} else {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			mp.Leader = -1
			mp.ISR = []int32{}
			mp.OfflineReplicas = []int32{self}
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
