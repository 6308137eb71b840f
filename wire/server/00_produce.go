package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce (key 0): v0-13, advertised and always refused. Broker side:
// KafkaApis.handleProduceRequest, as it answers a principal without WRITE.
//
//   - Every partition is TOPIC_AUTHORIZATION_FAILED, with an error message
//     (v8+) saying this is a read-only copy; a request with a
//     transactional id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED everywhere,
//     as Kafka answers one whose transactional id it may not write.
//     Neither is retriable, so a producer fails at once instead of retrying
//     until its delivery timeout.
//   - acks=0 gets no answer: the connection is closed, as Kafka closes it
//     when an acks=0 produce fails, so the producer notices.
//   - Produce stays advertised, from v0 as Kafka 4.x does although it
//     serves only v3+ (KAFKA-18659): librdkafka turns record-batch v2 and
//     compression on from the advertised Produce range.
//   - Nothing is ever written: the server holds no writer.

func init() { register(0, 0, handleProduce) }

// readOnly is the error message of every refused write.
const readOnly = "kfollower serves a read-only copy of its cluster; write to the cluster itself"

func handleProduce(_ context.Context, _ *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ProduceRequest)
	if req.Acks == 0 {
		return nil, errNotAnswered
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	code := kerr.TopicAuthorizationFailed.Code
	if req.TransactionID != nil {
		code = kerr.TransactionalIDAuthorizationFailed.Code
	}
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition = rp.Partition
			p.ErrorCode = code
			p.BaseOffset = -1
			p.ErrorMessage = kmsg.StringPtr(readOnly)
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
