package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/kfollower/kfollower/authz"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Observer is told what the server does, for metrics. Its methods are
// called from every connection's goroutine at once and must not block.
// metrics.NewServeObserver implements it.
type Observer interface {
	// Opened and Closed bracket each accepted connection that passed the
	// connection limits.
	Opened()
	Closed()
	// Rejected is a connection closed at accept: RejectMaxConnections or
	// RejectMaxConnectionsPerIP.
	Rejected(reason string)
	// BadInput is a connection closed for what its client sent or failed
	// to send (one of the Bad* reasons).
	BadInput(reason string)
	// Request is one request answered: its key, the first error code of
	// the answer (0 for none), the time from the request read to the
	// answer written, and the bytes written.
	Request(key int16, errorCode int16, latency time.Duration, bytes int)
	// Authenticated is one authentication, SASL (by mechanism) or TLS
	// ("TLS", a client certificate), that succeeded or failed.
	Authenticated(mechanism string, ok bool)
	// Denied is one authorization denial.
	Denied(op authz.Operation, rt authz.ResourceType)
}

// Rejection and bad-input reasons, the values Observer is given.
const (
	RejectMaxConnections      = "max_connections"
	RejectMaxConnectionsPerIP = "max_connections_per_ip"

	BadFrameSize    = "frame_size"          // size prefix negative, too small or above the limit
	BadMalformed    = "malformed"           // a request that does not parse
	BadUnknownKey   = "unknown_key"         // an API key not served
	BadVersion      = "unsupported_version" // a version outside the advertised range
	BadTimeout      = "timeout"             // slow or half-open: a deadline passed mid-request or mid-answer
	BadTLS          = "tls_handshake"       // the TLS handshake failed or did not end within IdleTimeout
	BadBeforeAuth   = "before_authentication"
	BadAuthFailed   = "authentication_failed"
	BadUnanswerable = "not_answered" // acks=0 Produce and the like
)

type nopObserver struct{}

func (nopObserver) Opened()                                    {}
func (nopObserver) Closed()                                    {}
func (nopObserver) Rejected(string)                            {}
func (nopObserver) BadInput(string)                            {}
func (nopObserver) Request(int16, int16, time.Duration, int)   {}
func (nopObserver) Authenticated(string, bool)                 {}
func (nopObserver) Denied(authz.Operation, authz.ResourceType) {}

// errorCode is the first error code of an answer, top level first, then
// in topic and partition order; 0 when every part succeeded.
func errorCode(resp kmsg.Response) int16 {
	switch resp.Key() {
	case 1:
		r := resp.(*kmsg.FetchResponse)
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	case 2:
		r := resp.(*kmsg.ListOffsetsResponse)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	case 3:
		r := resp.(*kmsg.MetadataResponse)
		for _, t := range r.Topics {
			if t.ErrorCode != 0 {
				return t.ErrorCode
			}
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	case 23:
		r := resp.(*kmsg.OffsetForLeaderEpochResponse)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	case 0:
		r := resp.(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	case 10:
		r := resp.(*kmsg.FindCoordinatorResponse)
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for _, c := range r.Coordinators {
			if c.ErrorCode != 0 {
				return c.ErrorCode
			}
		}
	case 18:
		r := resp.(*kmsg.ApiVersionsResponse)
		return r.ErrorCode
	case 60:
		r := resp.(*kmsg.DescribeClusterResponse)
		return r.ErrorCode
	case 22:
		r := resp.(*kmsg.InitProducerIDResponse)
		return r.ErrorCode
	case 17:
		r := resp.(*kmsg.SASLHandshakeResponse)
		return r.ErrorCode
	case 36:
		r := resp.(*kmsg.SASLAuthenticateResponse)
		return r.ErrorCode
	case 11:
		return resp.(*kmsg.JoinGroupResponse).ErrorCode
	case 14:
		return resp.(*kmsg.SyncGroupResponse).ErrorCode
	case 12:
		return resp.(*kmsg.HeartbeatResponse).ErrorCode
	case 13:
		return resp.(*kmsg.LeaveGroupResponse).ErrorCode
	case 68:
		return resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode
	case 16:
		return resp.(*kmsg.ListGroupsResponse).ErrorCode
	case 8:
		for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	case 9:
		r := resp.(*kmsg.OffsetFetchResponse)
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for _, g := range r.Groups {
			if g.ErrorCode != 0 {
				return g.ErrorCode
			}
		}
	case 15:
		for _, g := range resp.(*kmsg.DescribeGroupsResponse).Groups {
			if g.ErrorCode != 0 {
				return g.ErrorCode
			}
		}
	case 69:
		for _, g := range resp.(*kmsg.ConsumerGroupDescribeResponse).Groups {
			if g.ErrorCode != 0 {
				return g.ErrorCode
			}
		}
	}
	return 0
}

// ErrorName is the label of an error code: Kafka's name for it (NONE for
// 0, UNKNOWN_SERVER_ERROR for a code kerr does not know).
func ErrorName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e := kerr.TypedErrorForCode(code); e != nil {
		return e.Message
	}
	return kerr.UnknownServerError.Message
}

// auditLog writes the audit lines (authentications and denials) at most
// burst at once and rate a second after that; the lines it drops are
// counted into the next one written, so a flood costs a few lines.
type auditLog struct {
	log   *slog.Logger
	mu    sync.Mutex
	avail float64
	last  time.Time
	drops int
}

const (
	auditRate  = 10.0 // lines a second, sustained
	auditBurst = 50.0
)

func (a *auditLog) write(level slog.Level, msg string, args ...any) {
	a.mu.Lock()
	now := time.Now()
	if a.last.IsZero() {
		a.avail = auditBurst
	} else {
		a.avail = min(auditBurst, a.avail+now.Sub(a.last).Seconds()*auditRate)
	}
	a.last = now
	if a.avail < 1 {
		a.drops++
		a.mu.Unlock()
		return
	}
	a.avail--
	drops := a.drops
	a.drops = 0
	a.mu.Unlock()
	if drops > 0 {
		args = append(args, "audit_lines_dropped", drops)
	}
	a.log.Log(context.Background(), level, msg, append([]any{"audit", true}, args...)...)
}
