package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/authz"
	"github.com/kfollower/kfollower/wire/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{"Fetch": "fetch", "ListOffsets": "list_offsets", "SASLHandshake": "sasl_handshake",
		"OffsetForLeaderEpoch": "offset_for_leader_epoch", "ApiVersions": "api_versions", "InitProducerID": "init_producer_id"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestServeObserver(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	o := NewServeObserver(reg)
	o.Opened()
	o.Opened()
	o.Closed()
	o.Rejected(server.RejectMaxConnectionsPerIP)
	o.BadInput(server.BadFrameSize)
	o.Request(1, kerr.TopicAuthorizationFailed.Code, 3*time.Millisecond, 120)
	o.Request(1, 0, time.Millisecond, 80)
	o.Authenticated(authz.ScramSHA512, false)
	o.Denied(authz.Read, authz.Topic)
	want := `
# HELP kfollower_serve_connections_open Client connections open now.
# TYPE kfollower_serve_connections_open gauge
kfollower_serve_connections_open 1
# HELP kfollower_serve_sent_bytes_total Bytes of answers written to clients, by API.
# TYPE kfollower_serve_sent_bytes_total counter
kfollower_serve_sent_bytes_total{api="fetch"} 200
# HELP kfollower_serve_requests_total Requests answered by the served endpoint, by API and the answer's first error code (NONE when every part succeeded).
# TYPE kfollower_serve_requests_total counter
kfollower_serve_requests_total{api="fetch",error="NONE"} 1
kfollower_serve_requests_total{api="fetch",error="TOPIC_AUTHORIZATION_FAILED"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kfollower_serve_connections_open", "kfollower_serve_sent_bytes_total", "kfollower_serve_requests_total"); err != nil {
		t.Error(err)
	}
	for name, want := range map[string]float64{
		`kfollower_serve_connections_rejected_total{reason="max_connections_per_ip"}`:         1,
		`kfollower_serve_connections_rejected_total{reason="max_connections"}`:                0,
		`kfollower_serve_connections_closed_total{reason="frame_size"}`:                       1,
		`kfollower_serve_connections_closed_total{reason="idle"}`:                             0,
		`kfollower_serve_authentications_total{mechanism="SCRAM-SHA-512",result="failed"}`:    1,
		`kfollower_serve_authorization_denials_total{operation="READ",resource_type="TOPIC"}`: 1,
		`kfollower_serve_connections_total`:                                                   2,
	} {
		if got := gathered(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if n, err := testutil.GatherAndLint(reg); err != nil || len(n) > 0 {
		t.Errorf("lint: %v %v", n, err)
	}
}

// gathered is the value of one series, written name{label="v",...}.
func gathered(t *testing.T, g prometheus.Gatherer, series string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			var got []string
			for _, l := range m.GetLabel() {
				got = append(got, l.GetName()+`="`+l.GetValue()+`"`)
			}
			if strings.Join(got, ",") != labels {
				continue metric
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	t.Fatalf("no series %s", series)
	return 0
}
