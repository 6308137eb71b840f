package kafka_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/kfollower/kfollower/integration/kafka"
)

// The one harness test that needs no fault control, so it also runs against
// an external cluster (KFOLLOWER_KAFKA_BOOTSTRAP, e.g. docker-compose).
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	c := kafka.Start(t, kafka.Options{})
	var b [4]byte
	_, _ = rand.Read(b[:])
	topic := "roundtrip-" + hex.EncodeToString(b[:]) // unique on a shared cluster
	c.CreateTopic(ctx, topic, [][]int32{{1, 2, 3}}, nil)
	acked := produce(ctx, t, c, topic, "rt", 2_000)
	checkSame(t, consume(ctx, t, c, topic, len(acked)), acked)
	if !c.External() {
		for _, n := range c.Brokers() {
			if !n.Running() {
				t.Fatalf("broker %d is not running", n.ID)
			}
		}
	}
}
