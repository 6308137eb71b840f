package kafka_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
)

// What each broker of the version under test answers in ApiVersions, for
// the requests kfollower and the harness send: kfollower pins no version
// (kgo takes the highest both sides know), so these are the versions in
// use. Each must reach the version that carries what kfollower relies on
// (docs/kafka.md §13.1, docs/kafka-versions.md).
func TestAPIVersions(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{NeedsFaults: true})
	need := []struct {
		key  int16
		min  int16
		why  string
		name string
	}{
		{1, 12, "LastFetchedEpoch and DivergingEpoch (KIP-595's truncate-on-fetch)", "Fetch"},
		{23, 3, "the replica id field, -1 for a consumer", "OffsetForLeaderEpoch"},
		{2, 4, "CurrentLeaderEpoch (KIP-320)", "ListOffsets"},
		{3, 7, "leader epochs in Metadata (KIP-320)", "Metadata"},
		{43, 1, "the election type, for UNCLEAN (KIP-460)", "ElectLeaders"},
		{75, 0, "the ELR (KIP-966), which the harness reads", "DescribeTopicPartitions"},
	}
	vs, err := c.Admin().ApiVersions(ctx)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	if len(vs) != len(c.Brokers()) {
		t.Fatalf("ApiVersions answered by %d brokers, want %d", len(vs), len(c.Brokers()))
	}
	for _, v := range vs.Sorted() {
		err := v.Err
		if err == nil {
			err = kerr.ErrorForCode(v.Raw().ErrorCode)
		}
		if err != nil {
			t.Fatalf("ApiVersions from broker %d: %v", v.NodeID, err)
		}
		var got []string
		for _, r := range need {
			top, ok := v.KeyMaxVersion(r.key)
			if !ok || top < r.min {
				t.Errorf("Kafka %s broker %d: %s up to v%d (present %v), want v%d or later for %s", c.Version, v.NodeID, r.name, top, ok, r.min, r.why)
			}
			got = append(got, fmt.Sprintf("%s v%d", r.name, top))
		}
		t.Logf("Kafka %s broker %d: %s", c.Version, v.NodeID, strings.Join(got, ", "))
	}
}
