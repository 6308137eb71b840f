package server

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The consumer-group APIs, served only with Config.Groups, which forwards
// them to the cluster that keeps the groups (package groups): JoinGroup
// (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13), OffsetCommit (8),
// OffsetFetch (9), DescribeGroups (15), ListGroups (16) and KIP-848's
// ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69). Broker side:
// KafkaApis.handleJoinGroupRequest and its siblings, over the
// GroupCoordinator; here the group state lives upstream and this copy
// passes requests and answers through, as the Kafka protocol proxies
// (Kroxylicious, kafka-proxy) do.
//
//   - Parsed at every version kmsg knows; ApiVersions advertises only what
//     Groups.Versions gives (kmsg's range and the upstream's both), so a
//     client picks a version the upstream takes and the request is
//     forwarded at that version, never translated.
//   - Without Config.Groups these keys are not served: a request closes
//     the connection, as for any key not advertised, and FindCoordinator
//     refuses groups (10_find_coordinator.go).
//   - One connection's requests are forwarded one at a time, in order, on
//     upstream connections of that client connection's own
//     (Groups.Open): a JoinGroup or SyncGroup the coordinator holds back
//     (until the rebalance completes) holds back only that connection, as
//     Kafka mutes a channel while a request is in flight, and never
//     another member's request.
//   - With Config.Authorizer, each request is authorized first, for the
//     client's principal, as KafkaApis does (authorize.go): what is denied
//     is answered here and never forwarded, and only the rest goes
//     upstream, whose answer then gets the denials merged in.

// Groups forwards the consumer-group APIs upstream. It must be safe for
// concurrent use.
type Groups interface {
	// Versions is the range of key's versions that can be forwarded now;
	// ok is false when key is not to be advertised.
	Versions(key int16) (min, max int16, ok bool)
	// Coordinator checks that the upstream cluster has a coordinator for
	// group; nil lets FindCoordinator name this broker. An error is
	// answered with its text, and with its code if it wraps a *kerr.Error
	// (the upstream's answer), else COORDINATOR_NOT_AVAILABLE
	// (retriable).
	Coordinator(ctx context.Context, group string) error
	// Open starts forwarding for one client connection; the server calls
	// Close when the connection ends.
	Open() GroupSession
}

// GroupSession forwards one client connection's group requests.
type GroupSession interface {
	// Forward sends req upstream at req's version and returns the
	// answer. An upstream that cannot be reached is an answer too (a
	// retriable coordinator error in the response); an error closes the
	// client's connection.
	Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	// Close ends the session and its upstream connections.
	Close()
}

// groupKeys are the keys forwarded to Config.Groups.
var groupKeys = []int16{8, 9, 11, 12, 13, 14, 15, 16, 68, 69}

func init() {
	for _, k := range groupKeys {
		register(k, 0, handleGroupRequest)
	}
}

func isGroupKey(key int16) bool {
	for _, k := range groupKeys {
		if k == key {
			return true
		}
	}
	return false
}

var errGroupsOff = errors.New("consumer groups are not served (--serve-groups off)")

func handleGroupRequest(ctx context.Context, cc *conn, req kmsg.Request) (kmsg.Response, error) {
	g := cc.s.cfg.Groups
	if g == nil {
		return nil, errGroupsOff
	}
	chk := cc.authorizeGroup(req)
	if chk.forward == nil {
		return chk.answer, nil // denied: the upstream is not asked
	}
	if cc.groups == nil {
		cc.groups = g.Open()
	}
	resp, err := cc.groups.Forward(ctx, chk.forward)
	if err != nil {
		return nil, err
	}
	if chk.finish != nil {
		chk.finish(resp)
	}
	return resp, nil
}

// closeGroups ends the connection's group session, if it has one.
func (cc *conn) closeGroups() {
	if cc.groups != nil {
		cc.groups.Close()
		cc.groups = nil
	}
}
