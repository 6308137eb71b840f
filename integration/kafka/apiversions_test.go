package kafka_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	cl := c.Client()
	for _, n := range c.Brokers() {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := cl.Broker(int(n.ID)).Request(rctx, kmsg.NewPtrApiVersionsRequest())
		cancel()
		if err != nil {
			t.Fatalf("ApiVersions from broker %d: %v", n.ID, err)
		}
		maxes := map[int16]int16{}
		for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
			maxes[k.ApiKey] = k.MaxVersion
		}
		var got []string
		for _, r := range need {
			v, ok := maxes[r.key]
			if !ok || v < r.min {
				t.Errorf("Kafka %s broker %d: %s up to v%d (present %v), want v%d or later for %s", c.Version, n.ID, r.name, v, ok, r.min, r.why)
			}
			got = append(got, fmt.Sprintf("%s v%d", r.name, v))
		}
		t.Logf("Kafka %s broker %d: %s", c.Version, n.ID, strings.Join(got, ", "))
	}
}
