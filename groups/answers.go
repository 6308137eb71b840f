package groups

import (
	"github.com/kfollower/kfollower/wire/server"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// failed is kfollower's own answer to req: code in every error field the
// client reads for it, msg where the version has a message field. Kafka's
// AbstractRequest.getErrorResponse of each request does the same.
func failed(req kmsg.Request, code int16, msg string) kmsg.Response {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	m := kmsg.StringPtr(msg)
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode, r.Generation = code, -1
		r.MemberID = req.(*kmsg.JoinGroupRequest).MemberID
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = code
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = code
	case *kmsg.ConsumerGroupHeartbeatResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *kmsg.ListGroupsResponse:
		r.ErrorCode = code
	case *kmsg.OffsetCommitResponse:
		for _, t := range req.(*kmsg.OffsetCommitRequest).Topics {
			r.Topics = append(r.Topics, server.CommitTopicError(t, code))
		}
	case *kmsg.OffsetFetchResponse:
		q := req.(*kmsg.OffsetFetchRequest)
		if q.Version >= 8 {
			for _, g := range q.Groups {
				rg := kmsg.NewOffsetFetchResponseGroup()
				rg.Group, rg.ErrorCode = g.Group, code
				r.Groups = append(r.Groups, rg)
			}
			break
		}
		r.ErrorCode = code // v2+; v0-1 read the partitions' errors
		for _, t := range q.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.DescribeGroupsResponse:
		for _, g := range req.(*kmsg.DescribeGroupsRequest).Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode, rg.ErrorMessage = g, code, m
			r.Groups = append(r.Groups, rg)
		}
	case *kmsg.ConsumerGroupDescribeResponse:
		for _, g := range req.(*kmsg.ConsumerGroupDescribeRequest).Groups {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group, rg.ErrorCode, rg.ErrorMessage = g, code, m
			r.Groups = append(r.Groups, rg)
		}
	}
	return resp
}

// codes lists the non-zero error codes of a group answer, top-level
// first.
func codes(resp kmsg.Response) []int16 {
	var cs []int16
	add := func(c int16) {
		if c != 0 {
			cs = append(cs, c)
		}
	}
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		add(r.ErrorCode)
	case *kmsg.SyncGroupResponse:
		add(r.ErrorCode)
	case *kmsg.HeartbeatResponse:
		add(r.ErrorCode)
	case *kmsg.LeaveGroupResponse:
		add(r.ErrorCode)
		for _, m := range r.Members {
			add(m.ErrorCode)
		}
	case *kmsg.ConsumerGroupHeartbeatResponse:
		add(r.ErrorCode)
	case *kmsg.ListGroupsResponse:
		add(r.ErrorCode)
	case *kmsg.OffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(p.ErrorCode)
			}
		}
	case *kmsg.OffsetFetchResponse:
		add(r.ErrorCode)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(p.ErrorCode)
			}
		}
		for _, g := range r.Groups {
			add(g.ErrorCode)
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					add(p.ErrorCode)
				}
			}
		}
	case *kmsg.DescribeGroupsResponse:
		for _, g := range r.Groups {
			add(g.ErrorCode)
		}
	case *kmsg.ConsumerGroupDescribeResponse:
		for _, g := range r.Groups {
			add(g.ErrorCode)
		}
	}
	return cs
}
