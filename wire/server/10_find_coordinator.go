package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator (key 10): v0-6, advertised and always refused. Broker
// side: KafkaApis.handleFindCoordinatorRequest, as it answers a principal
// that may not describe the group or transactional id.
//
//   - A group (type 0) or share group (type 2) key:
//     GROUP_AUTHORIZATION_FAILED; a transactional id (type 1):
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED; another type: INVALID_REQUEST.
//     Each with a message (v1+) saying this copy has no coordinator. Not
//     COORDINATOR_NOT_AVAILABLE: that is retriable, and a client would
//     retry it silently forever.
//   - v4+ answers every key of the batch the same way.
//   - Advertised because librdkafka enables features (LZ4, the broker
//     group coordinator) from it. Group consumers need the groups step
//     (group requests forwarded upstream, not built yet); assigned partitions need no coordinator.

func init() { register(10, 0, handleFindCoordinator) }

const noCoordinator = "kfollower serves a read-only copy without consumer groups or transactions: assign partitions instead of subscribing"

func handleFindCoordinator(_ context.Context, _ *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	var code int16
	switch req.CoordinatorType {
	case 0, 2:
		code = kerr.GroupAuthorizationFailed.Code
	case 1:
		code = kerr.TransactionalIDAuthorizationFailed.Code
	default:
		code = kerr.InvalidRequest.Code
	}
	if req.Version < 4 {
		resp.ErrorCode = code
		resp.ErrorMessage = kmsg.StringPtr(noCoordinator)
		resp.NodeID, resp.Port = -1, -1
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.ErrorCode = code
		c.ErrorMessage = kmsg.StringPtr(noCoordinator)
		c.NodeID, c.Port = -1, -1
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil
}
