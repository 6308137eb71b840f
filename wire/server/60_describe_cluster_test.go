package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDescribeCluster(t *testing.T) {
	_, addr := testServer(t, newCatalog(), func(c *Config) { c.Advertise = "copy:9092" })
	c := dial(t, addr)
	for _, v := range versions(60) {
		for _, tc := range []struct {
			endpoint int8
			ops      bool
			err      error
		}{
			{1, false, nil},
			{1, true, nil},
			{2, false, kerr.MismatchedEndpointType},
			{3, false, kerr.UnsupportedEndpointType},
		} {
			if v == 0 && tc.endpoint != 1 {
				continue // EndpointType is v1+
			}
			req := at(kmsg.NewPtrDescribeClusterRequest(), v)
			req.EndpointType, req.IncludeClusterAuthorizedOperations = tc.endpoint, tc.ops
			resp := c.do(req).(*kmsg.DescribeClusterResponse)
			if err := kerr.ErrorForCode(resp.ErrorCode); err != tc.err {
				t.Errorf("v%d endpoint %d: error %v, want %v", v, tc.endpoint, err, tc.err)
				continue
			}
			if tc.err != nil {
				continue
			}
			if resp.ClusterID != "kfollower-test" || resp.ControllerID != 7 || len(resp.Brokers) != 1 {
				t.Errorf("v%d: %+v", v, resp)
			} else if b := resp.Brokers[0]; b.NodeID != 7 || b.Host != "copy" || b.Port != 9092 || b.IsFenced {
				t.Errorf("v%d: broker %+v", v, b)
			}
			wantOps := int32(-1 << 31)
			if tc.ops {
				wantOps = 1 << 8
			}
			if resp.ClusterAuthorizedOperations != wantOps {
				t.Errorf("v%d: operations %d, want %d", v, resp.ClusterAuthorizedOperations, wantOps)
			}
		}
	}
}
