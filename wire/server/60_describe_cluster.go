package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster (key 60): v0-2. Broker side:
// KafkaApis.handleDescribeCluster and AuthHelper.computeDescribeClusterResponse.
//
//   - This server is the only broker and the controller, never fenced.
//   - v1+: a request for the controllers' endpoints (EndpointType 2) is
//     MISMATCHED_ENDPOINT_TYPE, as a broker answers it; an unknown type is
//     UNSUPPORTED_ENDPOINT_TYPE.
//   - Authorized operations, when asked: DESCRIBE on the cluster.

func init() { register(60, 0, handleDescribeCluster) }

const endpointBrokers = 1

func handleDescribeCluster(_ context.Context, cc *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	cfg := cc.s.cfg
	if req.Version >= 1 {
		resp.EndpointType = req.EndpointType
		switch req.EndpointType {
		case endpointBrokers:
		case 2:
			resp.ErrorCode = kerr.MismatchedEndpointType.Code
			resp.ErrorMessage = kmsg.StringPtr("this is a broker endpoint; it does not describe controllers")
			return resp, nil
		default:
			resp.ErrorCode = kerr.UnsupportedEndpointType.Code
			return resp, nil
		}
	}
	resp.ClusterID = cfg.ClusterID
	resp.ControllerID = cfg.NodeID
	b := kmsg.NewDescribeClusterResponseBroker()
	b.NodeID, b.Host, b.Port = cfg.NodeID, cc.adv.host, cc.adv.port
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{b}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = aclDescribe
	}
	return resp, nil
}
