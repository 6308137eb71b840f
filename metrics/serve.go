package metrics

import (
	"strings"
	"time"

	"github.com/kfollower/kfollower/authz"
	"github.com/kfollower/kfollower/wire/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// serveObserver feeds the kfollower_serve_* metrics from wire/server.
type serveObserver struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	sent      *prometheus.CounterVec
	open      prometheus.Gauge
	accepted  prometheus.Counter
	rejected  *prometheus.CounterVec
	bad       *prometheus.CounterVec
	auth      *prometheus.CounterVec
	denials   *prometheus.CounterVec
	apiLabels map[int16]string
}

// NewServeObserver registers the served endpoint's metrics on reg (nil:
// none, for tests) and returns the server.Observer that feeds them. The
// series of every rejection and bad-input reason exist at zero from the
// start, so an alert on increase() sees the first one.
func NewServeObserver(reg prometheus.Registerer) server.Observer {
	f := promauto.With(reg)
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return f.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "serve", Name: name, Help: help}, labels)
	}
	o := &serveObserver{
		requests: counter("requests_total", "Requests answered by the served endpoint, by API and the answer's first error code (NONE when every part succeeded).", "api", "error"),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: "serve", Name: "request_duration_seconds",
			Help:    "Time from a request read to its answer written; a Fetch includes its long poll.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"api"}),
		sent: counter("sent_bytes_total", "Bytes of answers written to clients, by API.", "api"),
		open: f.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "serve", Name: "connections_open", Help: "Client connections open now."}),
		accepted: f.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "serve", Name: "connections_total",
			Help: "Client connections accepted within the connection limits."}),
		rejected: counter("connections_rejected_total", "Client connections closed as accepted, by the limit they were above (max_connections, max_connections_per_ip).", "reason"),
		bad: counter("connections_closed_total",
			"Client connections closed for what the client sent or did not send, by reason: idle, timeout, frame_size, malformed, unknown_key, unsupported_version, before_authentication, authentication_failed, tls_handshake, not_answered.", "reason"),
		auth:      counter("authentications_total", "Authentications by mechanism (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, TLS for a client certificate, unsupported) and result (ok, failed).", "mechanism", "result"),
		denials:   counter("authorization_denials_total", "Requests denied by the ACLs, per topic and request, by operation and resource type.", "operation", "resource_type"),
		apiLabels: map[int16]string{},
	}
	for _, r := range []string{server.RejectMaxConnections, server.RejectMaxConnectionsPerIP} {
		o.rejected.WithLabelValues(r)
	}
	for _, r := range []string{server.BadIdle, server.BadTimeout, server.BadFrameSize, server.BadMalformed, server.BadUnknownKey,
		server.BadVersion, server.BadBeforeAuth, server.BadAuthFailed, server.BadTLS, server.BadUnanswerable} {
		o.bad.WithLabelValues(r)
	}
	for _, m := range []string{authz.ScramSHA256, authz.ScramSHA512, authz.Plain, "TLS"} {
		o.auth.WithLabelValues(m, "ok")
		o.auth.WithLabelValues(m, "failed")
	}
	for _, op := range []authz.Operation{authz.Read, authz.Describe} {
		o.denials.WithLabelValues(op.String(), authz.Topic.String())
	}
	// The api label is Kafka's name for the key in snake case (fetch,
	// list_offsets, sasl_handshake), computed once per key: the server
	// answers only the keys it registered, so the label has few values.
	for key := range int16(100) {
		if n := kmsg.NameForKey(key); n != "" {
			o.apiLabels[key] = snake(n)
		}
	}
	return o
}

// snake turns a kmsg name (ListOffsets, SASLHandshake) into snake case.
func snake(name string) string {
	var b strings.Builder
	for i, r := range name {
		upper := r >= 'A' && r <= 'Z'
		if upper && i > 0 {
			prevLower := name[i-1] >= 'a' && name[i-1] <= 'z'
			nextLower := i+1 < len(name) && name[i+1] >= 'a' && name[i+1] <= 'z'
			if prevLower || nextLower && name[i-1] >= 'A' && name[i-1] <= 'Z' {
				b.WriteByte('_')
			}
		}
		b.WriteString(strings.ToLower(string(r)))
	}
	return b.String()
}

func (o *serveObserver) Opened() {
	o.open.Inc()
	o.accepted.Inc()
}
func (o *serveObserver) Closed()                { o.open.Dec() }
func (o *serveObserver) Rejected(reason string) { o.rejected.WithLabelValues(reason).Inc() }
func (o *serveObserver) BadInput(reason string) { o.bad.WithLabelValues(reason).Inc() }

func (o *serveObserver) Request(key, code int16, latency time.Duration, bytes int) {
	api := o.apiLabels[key]
	o.requests.WithLabelValues(api, server.ErrorName(code)).Inc()
	o.duration.WithLabelValues(api).Observe(latency.Seconds())
	o.sent.WithLabelValues(api).Add(float64(bytes))
}

func (o *serveObserver) Authenticated(mechanism string, ok bool) {
	result := "ok"
	if !ok {
		result = "failed"
	}
	o.auth.WithLabelValues(mechanism, result).Inc()
}

func (o *serveObserver) Denied(op authz.Operation, rt authz.ResourceType) {
	o.denials.WithLabelValues(op.String(), rt.String()).Inc()
}
