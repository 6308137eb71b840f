package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId (key 22): v0-5, advertised and always refused. Broker
// side: KafkaApis.handleInitProducerIdRequest, as it answers a principal
// without WRITE or IDEMPOTENT_WRITE.
//
//   - With a transactional id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
//     without (an idempotent producer, the Java producer's default):
//     CLUSTER_AUTHORIZATION_FAILED. Both are fatal to a producer, and
//     there is no error message field to say more.
//   - Producer id and epoch stay -1.

func init() { register(22, 0, handleInitProducerID) }

func handleInitProducerID(_ context.Context, _ *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	}
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	return resp, nil
}
