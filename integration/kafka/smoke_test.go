package kafka_test

import (
	"testing"

	"github.com/kfollower/kfollower/integration/kafka"
)

func TestSmoke(t *testing.T) {
	c := kafka.Start(t, kafka.Options{Layout: kafka.Isolated, NeedsFaults: true})
	t.Log(c.Bootstrap())
}
