package server

import (
	"context"
	"errors"

	"github.com/kfollower/kfollower/authz"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator (key 10): v0-6. Broker side:
// KafkaApis.handleFindCoordinatorRequest.
//
//   - Without Config.Groups, always refused, as Kafka answers a principal
//     that may not describe the group or transactional id: a group (type 0)
//     or share group (type 2) key GROUP_AUTHORIZATION_FAILED, a
//     transactional id (type 1) TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
//     another type INVALID_REQUEST, each with a message (v1+) saying this
//     copy has no coordinator. Not COORDINATOR_NOT_AVAILABLE: that is
//     retriable, and a client would retry it silently forever.
//   - With Config.Groups, a consumer group key (type 0) the principal may
//     not DESCRIBE is GROUP_AUTHORIZATION_FAILED without asking the
//     upstream (authorize.go); another names this broker, which forwards
//     the group's requests to the upstream coordinator (groups.go), once
//     Groups.Coordinator finds one upstream; until then the upstream's
//     error (GROUP_AUTHORIZATION_FAILED when kfollower's principal may not
//     describe the group), or COORDINATOR_NOT_AVAILABLE with the reason
//     when the upstream cannot be reached, which clients retry, as a
//     broker answers while __consumer_offsets has no leader. Share groups
//     and transactional ids are refused as above.
//   - v4+ (KIP-699) answers every key of the batch, each on its own.
//   - Advertised either way, because librdkafka enables features (LZ4, the
//     broker group coordinator) from it; assigned partitions need no
//     coordinator.

func init() { register(10, 0, handleFindCoordinator) }

const noCoordinator = "kfollower serves a read-only copy without consumer groups or transactions: assign partitions instead of subscribing"

const noShareGroups = "kfollower forwards consumer groups, not share groups or transactions"

func handleFindCoordinator(ctx context.Context, cc *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.NodeID, c.Port = -1, -1
		code, msg := cc.coordinator(ctx, req.CoordinatorType, key)
		if code == 0 {
			c.NodeID, c.Host, c.Port = cc.s.cfg.NodeID, cc.adv.host, cc.adv.port
		} else {
			c.ErrorCode, c.ErrorMessage = code, kmsg.StringPtr(msg)
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.Coordinators = nil
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
	}
	return resp, nil
}

// coordinator is the answer for one key: 0 names this broker.
func (cc *conn) coordinator(ctx context.Context, typ int8, key string) (int16, string) {
	g := cc.s.cfg.Groups
	switch {
	case typ == 0 && g != nil:
		if !cc.authorized(authz.Describe, authz.Group, key, false) {
			return kerr.GroupAuthorizationFailed.Code, groupDeniedMsg // the upstream not asked
		}
		if err := g.Coordinator(ctx, key); err != nil {
			code := kerr.CoordinatorNotAvailable.Code
			if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
				code = ke.Code // the upstream's answer, e.g. GROUP_AUTHORIZATION_FAILED
			}
			return code, err.Error()
		}
		return 0, ""
	case typ == 0 || typ == 2:
		msg := noCoordinator
		if g != nil {
			msg = noShareGroups
		}
		return kerr.GroupAuthorizationFailed.Code, msg
	case typ == 1:
		msg := noCoordinator
		if g != nil {
			msg = noShareGroups
		}
		return kerr.TransactionalIDAuthorizationFailed.Code, msg
	default:
		return kerr.InvalidRequest.Code, noCoordinator
	}
}
