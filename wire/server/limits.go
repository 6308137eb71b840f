package server

import (
	"net"
	"sync"
)

// Defaults for the limits that have one, each Kafka's for the setting
// named.
const (
	// DefaultMaxAuthBytes is sasl.server.max.receive.size: the largest
	// request taken before a SASL connection has authenticated.
	DefaultMaxAuthBytes = 512 << 10
)

// quotas counts the open connections, in total and per client address,
// against Config.MaxConnections and MaxConnectionsPerIP, as Kafka's
// ConnectionQuotas does for max.connections and max.connections.per.ip.
// Shared by every listener of a Server.
type quotas struct {
	mu    sync.Mutex
	total int
	perIP map[string]int
}

// acquire takes a slot for a connection from host, or returns the reason
// it is refused. Not as Kafka: a connection above max.connections is
// closed at once (Kafka's Acceptor stops accepting until a slot frees, so
// the kernel's backlog holds the rest), which keeps a flood from holding
// the listener.
func (s *Server) acquire(host string) (reason string) {
	q := &s.quotas
	q.mu.Lock()
	defer q.mu.Unlock()
	if max := s.cfg.MaxConnections; max > 0 && q.total >= max {
		return RejectMaxConnections
	}
	if max := s.cfg.MaxConnectionsPerIP; max > 0 && q.perIP[host] >= max {
		return RejectMaxConnectionsPerIP
	}
	if q.perIP == nil {
		q.perIP = map[string]int{}
	}
	q.total++
	q.perIP[host]++
	return ""
}

func (s *Server) release(host string) {
	q := &s.quotas
	q.mu.Lock()
	defer q.mu.Unlock()
	q.total--
	if q.perIP[host]--; q.perIP[host] <= 0 {
		delete(q.perIP, host)
	}
}

// OpenConnections is the number of client connections open now, on every
// listener.
func (s *Server) OpenConnections() int {
	s.quotas.mu.Lock()
	defer s.quotas.mu.Unlock()
	return s.quotas.total
}

// remoteHost is the IP of a connection's peer (the whole address when it
// has no port).
func remoteHost(c net.Conn) string {
	a := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(a); err == nil {
		return h
	}
	return a
}
