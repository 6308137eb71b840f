package server

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions (key 18): v0-5. Broker side: KafkaApis.handleApiVersionsRequest
// and ApiVersionsRequest.
//
//   - Lists every key registered here, each from Kafka 4.x's oldest version
//     (KIP-896) to the newest kmsg encodes, and nothing else: a client then
//     fails at once with UnsupportedVersion for the admin writes. The
//     group keys are listed only with Config.Groups, in the ranges it
//     gives: kmsg's and the upstream cluster's both (groups.go).
//   - A version above v5 is answered in a v0 body with UNSUPPORTED_VERSION
//     and ApiVersions' own range only, the body unparsed
//     (RequestContext.parseRequest, ApiVersionsRequest.getErrorResponse),
//     so the client retries at a version both know (KIP-511).
//   - v3+: a client software name or version that does not match
//     [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? is INVALID_REQUEST
//     (ApiVersionsRequest.isValid).
//   - v5 (KIP-1242): a client naming the cluster and node it meant to reach
//     gets REBOOTSTRAP_REQUIRED when either is not this one, and
//     INVALID_REQUEST when it names only one of them.
//   - No features (KIP-584): this server has none to finalize.
//
// The response header is v0 at every version (appendResponse).

const apiVersionsKey = 18

func init() { register(apiVersionsKey, 0, handleApiVersions) }

func handleApiVersions(_ context.Context, cc *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	self := apis[apiVersionsKey]
	if req.Version > self.max {
		resp.Version = 0
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = apiVersionsKey, self.min, self.max
		resp.ApiKeys = append(resp.ApiKeys, k)
		return resp, nil
	}
	if req.Version >= 3 && (!validSoftware(req.ClientSoftwareName) || !validSoftware(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	if req.Version >= 5 {
		named, node := req.ClusterID != nil, req.NodeID != -1
		switch {
		case named != node:
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp, nil
		case named && (*req.ClusterID != cc.s.cfg.ClusterID || req.NodeID != cc.s.cfg.NodeID):
			resp.ErrorCode = kerr.RebootstrapRequired.Code
			return resp, nil
		}
	}
	resp.ApiKeys = advertisedKeys(cc.s.cfg.Groups)
	return resp, nil
}

// advertisedKeys is the registered keys and ranges, by key. The group keys
// are listed only with g, in the ranges g forwards now (groups.go).
func advertisedKeys(g Groups) []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for key, a := range apis {
		min, max := a.min, a.max
		if isGroupKey(key) {
			var ok bool
			if g == nil {
				continue
			}
			if min, max, ok = g.Versions(key); !ok {
				continue
			}
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = key, min, max
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	return keys
}

// validSoftware is ApiVersionsRequest's SOFTWARE_NAME_VERSION_PATTERN:
// alphanumeric at both ends, dashes and dots allowed inside.
func validSoftware(s string) bool {
	alnum := func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }
	if s == "" || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}
