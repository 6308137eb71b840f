//go:build compose

package compose

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/goleak"
)

// The compose project's addresses on the host: docker-compose.yml's ports,
// from the variables integration/compose/run exports (it moves a taken port).
var (
	hostBrokers = []string{
		"127.0.0.1:" + hostPort("KAFKA_1_HOST_PORT", "29092"),
		"127.0.0.1:" + hostPort("KAFKA_2_HOST_PORT", "29093"),
		"127.0.0.1:" + hostPort("KAFKA_3_HOST_PORT", "29094"),
	}
	kfollowerURL = "http://127.0.0.1:" + hostPort("KFOLLOWER_HOST_PORT", "7644")
	promURL      = "http://127.0.0.1:" + hostPort("PROMETHEUS_HOST_PORT", "9090")
)

// hostPort is the port variable's value, or docker-compose.yml's default.
func hostPort(name, def string) string {
	if p := os.Getenv(name); p != "" {
		return p
	}
	return def
}

// composeCmd is the compose command integration/compose/run uses ("docker
// compose" or "docker-compose"); it exports COMPOSE_PROJECT_NAME and
// COMPOSE_FILE, so the commands here name the same project.
var composeCmd []string

// kfollowerBin is kfollower built on the host, for `verify`.
var kfollowerBin string

func TestMain(m *testing.M) {
	composeCmd = strings.Fields(os.Getenv("KFOLLOWER_COMPOSE"))
	if len(composeCmd) == 0 || os.Getenv("COMPOSE_PROJECT_NAME") == "" {
		fmt.Fprintln(os.Stderr, "these tests need the compose project that integration/compose/run (make test-compose) brings up: KFOLLOWER_COMPOSE and COMPOSE_PROJECT_NAME are not set")
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "kfollower-compose-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kfollowerBin = filepath.Join(dir, "kfollower")
	build := exec.Command("go", "build", "-o", kfollowerBin, "../../cmd/kfollower")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building kfollower: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	http.DefaultClient.CloseIdleConnections() // keep-alive readers are not leaks
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutine leak after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// TestCompose runs in order, each step on what the one before left: the
// project is one long-lived cluster, as a user's would be.
func TestCompose(t *testing.T) {
	cl := newClient(t)
	adm := kadm.NewClient(cl)
	waitHTTP(t, kfollowerURL+"/healthz", 2*time.Minute)
	nothing := alertExpr(t, "KfollowerFollowsNothing")

	// Before any topic exists: ready with zero partitions (README,
	// "/readyz"), and the alert for a --topics that matches nothing sees it.
	t.Run("ZeroPartitions", func(t *testing.T) {
		if st := getStatus(t); !st.Ready || len(st.Partitions) != 0 {
			t.Fatalf("/status before any topic: ready %v, %d partitions; want ready with none", st.Ready, len(st.Partitions))
		}
		waitHTTP(t, kfollowerURL+"/readyz", time.Second)
		waitProm(t, nothing, 2*time.Minute, func(v []promSample) error {
			if len(v) != 1 {
				return fmt.Errorf("%d series, want 1", len(v))
			}
			return nil
		})
	})

	produced := map[string]int{}
	t.Run("FollowAndVerify", func(t *testing.T) {
		// The in-network listener, as docker-compose.yml and the README show.
		compose(t, "exec", "-T", "kafka-1", "/opt/kafka/bin/kafka-topics.sh", "--bootstrap-server", "kafka-1:19092",
			"--create", "--topic", "orders", "--partitions", "3", "--replication-factor", "3")
		// And the host listener.
		res, err := adm.CreateTopic(ctxT(t, time.Minute), 1, 3, nil, "audit")
		if err != nil || res.Err != nil {
			t.Fatalf("creating topic audit: %v %v", err, res.Err)
		}
		produce(t, cl, "orders", 6000)
		produce(t, cl, "audit", 500)
		produced["orders"], produced["audit"] = 6000, 500
		st := waitCaughtUp(t, adm, []string{"orders", "audit"})
		var total int64
		for _, p := range st.Partitions {
			total += p.LogEndOffset
		}
		if total != 6500 {
			t.Fatalf("kfollower holds %d records of orders and audit, want 6500: %+v", total, st.Partitions)
		}
		verifyAll(t, 4)
	})

	t.Run("Prometheus", func(t *testing.T) {
		waitProm(t, `kfollower_ready`, 2*time.Minute, func(v []promSample) error {
			if len(v) != 1 || v[0].Value != 1 {
				return fmt.Errorf("kfollower_ready = %v, want one series at 1", v)
			}
			return nil
		})
		waitProm(t, `up{job="kfollower"}`, time.Minute, func(v []promSample) error {
			if len(v) != 1 || v[0].Value != 1 {
				return fmt.Errorf("up = %v, want 1", v)
			}
			return nil
		})
		checkRulesLoaded(t)
		waitProm(t, nothing, time.Minute, func(v []promSample) error {
			if len(v) != 0 {
				return fmt.Errorf("%v, want no series now that partitions are followed", v)
			}
			return nil
		})
	})

	t.Run("LeaderKilled", func(t *testing.T) {
		before := scrape(t)
		leader := mustLeaderOf(t, adm, "orders", 0)
		service := fmt.Sprintf("kafka-%d", leader)
		ctr := containerID(t, service)
		t.Logf("orders-0's leader is node %d (%s, container %.12s)", leader, service, ctr)

		// Produce with acks=all while the leader's container is killed:
		// every acknowledged record must end up in the copy, and nothing is
		// truncated (a clean election: the new leader was in the ISR).
		ctx, cancel := context.WithCancel(context.Background())
		acked := make(chan int, 1)
		go func() { acked <- produceUntil(ctx, cl, "orders") }()
		waitFor(t, "records produced before the kill", time.Minute, func() error {
			end, err := leaderEnd(adm, "orders")
			if n := end - int64(produced["orders"]); err != nil || n < 1000 {
				return fmt.Errorf("%d new records so far (%v)", n, err)
			}
			return nil
		})
		docker(t, "kill", ctr)
		var atFailover int64
		waitFor(t, "orders-0 led by another node", time.Minute, func() error {
			l, err := leaderOf(adm, "orders", 0)
			if err != nil || l == leader || l < 0 {
				return fmt.Errorf("leader %d (%v)", l, err)
			}
			atFailover, err = leaderEnd(adm, "orders")
			return err
		})
		waitFor(t, "records produced after the failover", time.Minute, func() error {
			end, err := leaderEnd(adm, "orders")
			if n := end - atFailover; err != nil || n < 1000 {
				return fmt.Errorf("%d new records so far (%v)", n, err)
			}
			return nil
		})
		cancel()
		n := <-acked
		if n < 2000 {
			t.Fatalf("only %d records acknowledged around the failover", n)
		}
		produced["orders"] += n
		t.Logf("%d records acknowledged around the kill", n)

		st := waitCaughtUp(t, adm, []string{"orders", "audit"})
		var held int64
		for _, p := range st.Partitions {
			if p.Topic == "orders" {
				held += p.LogEndOffset
			}
			if p.LastTruncation != nil {
				t.Errorf("%s-%d truncated: %s", p.Topic, p.Partition, p.LastTruncation)
			}
		}
		// The idempotent producer writes each acknowledged record once;
		// records whose produce the cancel cut short may be written too, so
		// the copy may hold more than was acknowledged, never fewer.
		if held < int64(produced["orders"]) {
			t.Errorf("kfollower holds %d records of orders, %d were acknowledged", held, produced["orders"])
		}
		after := scrape(t)
		if d := after.sum("kfollower_committed_records_lost_total") - before.sum("kfollower_committed_records_lost_total"); d != 0 {
			t.Errorf("kfollower_committed_records_lost_total rose by %v through a clean failover", d)
		}
		if d := after.sum("kfollower_truncations_total") - before.sum("kfollower_truncations_total"); d != 0 {
			t.Errorf("kfollower_truncations_total rose by %v through a clean failover", d)
		}
		if v := after.sum("kfollower_conformance_violations_total"); v != 0 {
			t.Errorf("kfollower_conformance_violations_total = %v, want 0: %s", v, after.series("kfollower_conformance_violations_total"))
		}
		if d := after.sum("kfollower_leader_changes_total") - before.sum("kfollower_leader_changes_total"); d < 1 {
			t.Errorf("kfollower_leader_changes_total rose by %v, want at least 1 (node %d led orders-0)", d, leader)
		}
		for p := int32(0); p < 3; p++ {
			sameBytes(t, adm, "orders", p, st)
		}

		// The killed container comes back and rejoins every ISR. Docker
		// does not restart a container that `docker kill` stopped, whatever
		// its restart policy (it counts as stopped by hand).
		t.Logf("%s after the kill: %s", service, docker(t, "inspect", "-f", "{{.State.Status}}, {{.RestartCount}} restarts", ctr))
		compose(t, "start", service)
		waitFor(t, service+" healthy", 3*time.Minute, func() error {
			if h := docker(t, "inspect", "-f", "{{.State.Health.Status}}", ctr); h != "healthy" {
				return fmt.Errorf("health %s", h)
			}
			return nil
		})
		waitFor(t, fmt.Sprintf("node %d back in every ISR", leader), 2*time.Minute, func() error {
			return inAllISRs(adm, leader, "orders", "audit")
		})
		waitCaughtUp(t, adm, []string{"orders", "audit"})
		verifyAll(t, 4)
	})

	t.Run("Dashboard", func(t *testing.T) {
		checkDashboard(t)
	})

	t.Run("StopStart", func(t *testing.T) {
		before := waitCaughtUp(t, adm, []string{"orders", "audit"})
		ctr := containerID(t, "kfollower")
		compose(t, "stop", "kfollower")
		if code := docker(t, "inspect", "-f", "{{.State.ExitCode}}", ctr); code != "0" {
			t.Fatalf("kfollower exited with %s on stop, want 0", code)
		}
		// kfollower logs on stderr; run keeps both streams.
		if logs := docker(t, "logs", "--tail", "5", ctr); !strings.Contains(logs, "logs flushed and closed") {
			t.Errorf("kfollower's last log lines do not say the logs were flushed and closed:\n%s", logs)
		}
		compose(t, "start", "kfollower")
		waitHTTP(t, kfollowerURL+"/readyz", 2*time.Minute)
		st := getStatus(t)
		if !samePartitions(before, st) {
			t.Fatalf("after a restart kfollower holds\n%+v\nbefore it held\n%+v", st.Partitions, before.Partitions)
		}
		m := scrape(t)
		if n := m.sum("kfollower_appended_records_total"); n != 0 {
			t.Errorf("kfollower appended %v records after a restart with nothing new: it copied again what its volume held", n)
		}
		// New records are appended after what the volume held.
		produce(t, cl, "audit", 100)
		st = waitCaughtUp(t, adm, []string{"orders", "audit"})
		if got, want := logEnd(st, "audit", 0), logEnd(before, "audit", 0)+100; got != want {
			t.Errorf("audit-0 log end %d after 100 more records, want %d", got, want)
		}
		if n := scrape(t).sum("kfollower_appended_records_total"); n != 100 {
			t.Errorf("kfollower appended %v records since the restart, want the 100 new ones", n)
		}
		verifyAll(t, 4)
	})
}
