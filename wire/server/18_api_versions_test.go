package server

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The advertised ranges: exactly the keys served, from Kafka 4.x's
// minimums (KIP-896) to kmsg's maximums.
func TestAdvertised(t *testing.T) {
	want := map[int16]int16{ // key: Kafka 4.x's oldest version
		0:  0, // Produce: advertised from 0 as Kafka does (KAFKA-18659)
		1:  4, // Fetch
		2:  1, // ListOffsets
		3:  0, // Metadata
		10: 0, // FindCoordinator
		17: 0, // SaslHandshake: Kafka advertises it on every listener
		18: 0, // ApiVersions
		22: 0, // InitProducerId
		23: 2, // OffsetForLeaderEpoch
		36: 0, // SaslAuthenticate
		60: 0, // DescribeCluster
	}
	got := advertisedKeys(nil)
	if len(got) != len(want) {
		t.Errorf("%d keys advertised, want %d", len(got), len(want))
	}
	for _, k := range got {
		min, ok := want[k.ApiKey]
		if !ok {
			t.Errorf("key %d (%s) advertised", k.ApiKey, kmsg.NameForKey(k.ApiKey))
			continue
		}
		if max := kmsg.RequestForKey(k.ApiKey).MaxVersion(); k.MinVersion != min || k.MaxVersion != max {
			t.Errorf("%s: v%d-v%d, want v%d-v%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, min, max)
		}
	}
	if !slices.IsSortedFunc(got, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) }) {
		t.Error("keys not sorted")
	}
}

func TestApiVersions(t *testing.T) {
	_, addr := testServer(t, newCatalog())
	named := func(v int16, name, version string, cluster *string, node int32) *kmsg.ApiVersionsRequest {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version, r.ClientSoftwareName, r.ClientSoftwareVersion, r.ClusterID, r.NodeID = v, name, version, cluster, node
		return r
	}
	for _, tc := range []struct {
		name string
		req  *kmsg.ApiVersionsRequest
		err  error // nil: the full list
	}{
		{"v0", named(0, "", "", nil, -1), nil},
		{"v2", named(2, "", "", nil, -1), nil},
		{"v3 named", named(3, "kgo", "1.2.3-rc.1", nil, -1), nil},
		{"v3 bad name", named(3, "-kgo", "1", nil, -1), kerr.InvalidRequest},
		{"v3 empty version", named(3, "kgo", "", nil, -1), kerr.InvalidRequest},
		{"v4 bad version", named(4, "kgo", "1.0_beta", nil, -1), kerr.InvalidRequest},
		{"v5 bootstrapping", named(5, "kgo", "1", nil, -1), nil},
		{"v5 this cluster and node", named(5, "kgo", "1", kmsg.StringPtr("kfollower-test"), 7), nil},
		{"v5 other node", named(5, "kgo", "1", kmsg.StringPtr("kfollower-test"), 8), kerr.RebootstrapRequired},
		{"v5 other cluster", named(5, "kgo", "1", kmsg.StringPtr("upstream"), 7), kerr.RebootstrapRequired},
		{"v5 node without cluster", named(5, "kgo", "1", nil, 7), kerr.InvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr)
			resp := c.do(tc.req).(*kmsg.ApiVersionsResponse)
			if err := kerr.ErrorForCode(resp.ErrorCode); err != tc.err {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if tc.err == nil && !sameKeys(resp.ApiKeys, advertisedKeys(nil)) {
				t.Errorf("keys %v, want %v", resp.ApiKeys, advertisedKeys(nil))
			}
			if tc.err != nil && len(resp.ApiKeys) != 0 {
				t.Errorf("keys %v with %v, want none", resp.ApiKeys, tc.err)
			}
		})
	}
}

// A version above the newest is answered in a v0 body, unparsed, with
// UNSUPPORTED_VERSION and ApiVersions' own range (KIP-511); the client can
// then ask again on the same connection.
func TestApiVersionsAboveMax(t *testing.T) {
	_, addr := testServer(t, newCatalog())
	c := dial(t, addr)
	max := apis[apiVersionsKey].max
	req := at(kmsg.NewPtrApiVersionsRequest(), max+1)
	// A body kmsg could not parse at any version: the server must not try.
	f := frame(1, req)
	f = append(f[:len(f)-len(req.AppendTo(nil))], 0xff, 0xff, 0xff)
	f[0], f[1], f[2], f[3] = 0, 0, 0, byte(len(f)-4)
	c.write(f)
	c.corr = 1
	resp := c.recv(at(kmsg.NewPtrApiVersionsRequest(), 0), 1).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("error %d, want UNSUPPORTED_VERSION", resp.ErrorCode)
	}
	want := []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: max}}
	if !sameKeys(resp.ApiKeys, want) {
		t.Errorf("keys %v, want %v", resp.ApiKeys, want)
	}
	retry := at(kmsg.NewPtrApiVersionsRequest(), max)
	retry.ClientSoftwareName, retry.ClientSoftwareVersion = "kgo", "1"
	again := c.do(retry).(*kmsg.ApiVersionsResponse)
	if again.ErrorCode != 0 || len(again.ApiKeys) != len(advertisedKeys(nil)) {
		t.Errorf("retry at v%d: error %d, %d keys", max, again.ErrorCode, len(again.ApiKeys))
	}
}

func sameKeys(a, b []kmsg.ApiVersionsResponseApiKey) bool {
	return slices.EqualFunc(a, b, func(a, b kmsg.ApiVersionsResponseApiKey) bool {
		return a.ApiKey == b.ApiKey && a.MinVersion == b.MinVersion && a.MaxVersion == b.MaxVersion
	})
}
