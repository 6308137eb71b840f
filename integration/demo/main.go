// Command demo is `make demo`: a local three-node Kafka cluster started by
// the test harness (no Docker), a producer, and kfollower following it. It
// prints where to look and stops everything on Ctrl-C, leaving no JVM.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	bin := flag.String("kfollower", "bin/kfollower", "the kfollower binary")
	httpAddr := flag.String("http", "127.0.0.1:7644", "kfollower's HTTP address")
	dir := flag.String("dir", "", "where the cluster and kfollower's copy go (default: a new temp dir)")
	rate := flag.Int("rate", 200, "records per second the producer writes to each topic")
	flag.Parse()
	if err := run(*bin, *httpAddr, *dir, *rate); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) { fmt.Printf("demo: "+format+"\n", args...) }

func run(bin, httpAddr, dir string, rate int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("kfollower binary: %w (make demo builds it)", err)
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "kfollower-demo-")
		if err != nil {
			return err
		}
		dir = d
	}
	data := filepath.Join(dir, "data")
	sa := kafka.NewStandalone(dir, os.Stderr)
	defer func() {
		say("stopping the Kafka cluster")
		sa.Close()
		say("stopped. kfollower's copy stays in %s", data)
	}()

	say("starting a 3-node Kafka %s cluster (KRaft, JVMs on loopback; the first run downloads the jars with Maven)", kafka.Version())
	c, err := sa.Start(kafka.Options{})
	if err != nil {
		return err
	}
	topics := map[string]int{"demo-orders": 3, "demo-audit": 1}
	if err := sa.Do(func() {
		for t, n := range topics {
			var assign [][]int32
			for p := range n {
				assign = append(assign, []int32{int32(p%3 + 1), int32((p+1)%3 + 1), int32((p+2)%3 + 1)})
			}
			c.CreateTopic(ctx, t, assign, nil)
		}
	}); err != nil {
		return err
	}
	boot := strings.Join(c.Bootstrap(), ",")
	say("cluster up: %s; topics demo-orders (3 partitions) and demo-audit (1), replication factor 3", boot)

	// The producer is owned here and ends with pctx, before the cluster.
	pctx, stopProducer := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopProducer()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return err
	}
	defer cl.Close()
	wg.Go(func() { produce(pctx, cl, rate) })

	cmd := exec.Command(bin, "run", "--bootstrap-servers", boot, "--topics", "demo-.*", "--data-dir", data,
		"--http-listen", httpAddr, "--progress-interval", "15s")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// Its own process group: Ctrl-C reaches the demo, which stops
	// kfollower with SIGTERM in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kfollower: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		select {
		case err := <-exited:
			say("kfollower had exited: %v", err)
			return
		default:
		}
		say("stopping kfollower (SIGTERM)")
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			say("kfollower exited: %v", exitStatus(err))
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			say("kfollower did not stop within 15 s; killed")
		}
	}()

	base := "http://" + httpAddr
	if err := waitReady(ctx, base+"/readyz", exited); err != nil || ctx.Err() != nil {
		return err
	}
	say(`kfollower is following demo-.* and ready. Look at:
    %[1]s/status    per-partition state as JSON
    %[1]s/metrics   Prometheus metrics
    %[1]s/readyz    ready once every partition reconciled with its leader
    %[2]s     the copy, in Kafka's own on-disk layout
  Ctrl-C stops the producer, kfollower and the cluster.`, base, data)

	select {
	case <-ctx.Done():
		fmt.Println()
		say("interrupted")
		return nil
	case err := <-exited:
		exited <- err // for the deferred check
		return fmt.Errorf("kfollower exited early: %v", exitStatus(err))
	}
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// produce writes rate records a second to each demo topic until ctx ends.
func produce(ctx context.Context, cl *kgo.Client, rate int) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for range max(rate/10, 1) {
			for _, t := range []string{"demo-orders", "demo-audit"} {
				r := &kgo.Record{Topic: t, Key: fmt.Appendf(nil, "k%d", i%100), Value: fmt.Appendf(nil, `{"n":%d,"at":%q}`, i, time.Now().Format(time.RFC3339Nano))}
				cl.Produce(ctx, r, nil)
			}
		}
	}
}

// waitReady polls url until it answers 200, kfollower exits or ctx ends.
func waitReady(ctx context.Context, url string, exited chan error) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("kfollower exited before it was ready: %v", exitStatus(err))
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kfollower not ready at %s within 90 s", url)
		}
	}
}
