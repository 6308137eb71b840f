// Command demo is `make demo`: a local Kafka cluster started by the test
// harness (one controller and three brokers as JVMs, no Docker), a
// producer, and kfollower following it, walked through what kfollower is
// for (story.go): a clean leader kill that raises no alarm, then an unclean
// election that loses committed records, which kfollower reports with
// their exact offsets, in its metrics and in lost+found; `kfollower
// verify` matching after the reconciliation; a Kafka console consumer
// reading kfollower's own copy over --serve. It narrates each step and
// ends on its own (or, with --stay, keeps following until Ctrl-C); Ctrl-C
// at any point stops everything, leaving no JVM.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
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

// options are the demo's flags.
type options struct {
	bin, httpAddr, dir string
	rate               int
	// fast skips the pauses that give a reader time (CI: the test).
	fast bool
	// stay keeps the cluster and kfollower running after the story, until
	// Ctrl-C.
	stay bool
}

func main() {
	var o options
	flag.StringVar(&o.bin, "kfollower", "bin/kfollower", "the kfollower binary")
	flag.StringVar(&o.httpAddr, "http", "127.0.0.1:7644", "kfollower's HTTP address")
	flag.StringVar(&o.dir, "dir", "", "where the cluster and kfollower's copy go (default: a new temp dir)")
	flag.IntVar(&o.rate, "rate", 200, "records per second the producer writes to demo-orders")
	flag.BoolVar(&o.fast, "fast", false, "no pauses between the steps (for CI)")
	flag.BoolVar(&o.stay, "stay", false, "after the story, keep everything running until Ctrl-C")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) { fmt.Printf("demo: "+format+"\n", args...) }

func run(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := os.Stat(o.bin); err != nil {
		return fmt.Errorf("kfollower binary: %w (make demo builds it)", err)
	}
	if o.dir == "" {
		d, err := os.MkdirTemp("", "kfollower-demo-")
		if err != nil {
			return err
		}
		o.dir = d
	} else if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	data := filepath.Join(o.dir, "data")
	sa := kafka.NewStandalone(o.dir, os.Stderr)
	defer func() {
		say("stopping the Kafka cluster")
		sa.Close()
		say("stopped. kfollower's copy stays in %s", data)
	}()

	say("starting a Kafka %s cluster: a KRaft controller and brokers 1, 2, 3 (JVMs on loopback; the first run downloads the jars with Maven)", kafka.Version())
	// Starting waits for the harness's machine-wide lock (another
	// cluster may hold it) and then for the nodes, without a context: a
	// Ctrl-C meanwhile ends the demo at once, and the kernel kills any
	// JVM already started with it (the harness starts them with
	// Pdeathsig).
	var c *kafka.Cluster
	started := make(chan error, 1)
	go func() {
		var err error
		c, err = sa.Start(kafka.Options{Layout: kafka.Isolated, NeedsFaults: true})
		started <- err
	}()
	select {
	case err := <-started:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		fmt.Println()
		say("interrupted while the cluster was starting")
		os.Exit(130)
	}
	if err := sa.Do(func() {
		c.CreateTopic(ctx, "demo-orders", [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	}); err != nil {
		return err
	}
	boot := strings.Join(c.Bootstrap(), ",")
	say("cluster up: %s; topic demo-orders (replicas 1, 2, 3; min.insync.replicas 2)", boot)

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
	wg.Go(func() { produce(pctx, cl, o.rate) })

	k, err := startKfollower(o, boot, data)
	if err != nil {
		return err
	}
	defer k.stop()

	if err := k.waitReady(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	say(`kfollower is following demo-.* and ready. Look at:
    %[1]s/status    per-partition state as JSON (or: %[3]s status --http %[4]s)
    %[1]s/metrics   Prometheus metrics
    %[1]s/readyz    ready once every partition reconciled with its leader
    %[2]s     the copy, in Kafka's own on-disk layout
  Ctrl-C stops the producer, kfollower and the cluster.`, k.base, data, o.bin, o.httpAddr)

	s := &story{o: o, sa: sa, c: c, k: k, boot: boot, data: data}
	if err := s.tell(ctx); err != nil || ctx.Err() != nil {
		if ctx.Err() != nil {
			fmt.Println()
			say("interrupted")
			return nil
		}
		return err
	}
	if !o.stay {
		return nil
	}
	say("--stay: still following; Ctrl-C stops everything")
	select {
	case <-ctx.Done():
		fmt.Println()
		say("interrupted")
		return nil
	case err := <-k.exited:
		k.exited <- err // for stop
		return fmt.Errorf("kfollower exited early: %v", exitStatus(err))
	}
}

// kfollower is the daemon the demo runs; its log goes to stdout, each line
// marked, and is kept to find its loss line in.
type kfollower struct {
	cmd    *exec.Cmd
	base   string // http://host:port
	exited chan error

	mu  sync.Mutex // guards log
	log bytes.Buffer
}

func startKfollower(o options, boot, data string) (*kfollower, error) {
	serveAddr, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	metadata, progress := "5s", "30s"
	if o.fast {
		metadata = "1s"
	}
	k := &kfollower{base: "http://" + o.httpAddr, exited: make(chan error, 1)}
	k.cmd = exec.Command(o.bin, "run", "--bootstrap-servers", boot, "--topics", "demo-.*", "--data-dir", data,
		"--http-listen", o.httpAddr, "--progress-interval", progress, "--metadata-interval", metadata,
		"--serve", serveAddr)
	w := &lineWriter{prefix: "  kfollower | ", out: os.Stdout, keep: k}
	k.cmd.Stdout, k.cmd.Stderr = w, w
	// Its own process group: Ctrl-C reaches the demo, which stops
	// kfollower with SIGTERM in order.
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := k.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kfollower: %w", err)
	}
	// The waiter ends when the process does, which stop guarantees.
	go func() { k.exited <- k.cmd.Wait() }()
	return k, nil
}

func (k *kfollower) logged() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.log.String()
}

// stop ends kfollower with SIGTERM, or SIGKILL after 15 s.
func (k *kfollower) stop() {
	select {
	case err := <-k.exited:
		say("kfollower had exited: %v", exitStatus(err))
		return
	default:
	}
	say("stopping kfollower (SIGTERM)")
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-k.exited:
		say("kfollower exited: %v", exitStatus(err))
	case <-time.After(15 * time.Second):
		_ = k.cmd.Process.Kill()
		<-k.exited
		say("kfollower did not stop within 15 s; killed")
	}
}

// waitReady polls /readyz until it answers 200, kfollower exits or ctx
// ends.
func (k *kfollower) waitReady(ctx context.Context) error {
	return k.wait(ctx, "ready", 120*time.Second, func() bool {
		resp, err := http.Get(k.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// wait polls cond until it holds, kfollower exits, ctx ends (nil) or the
// timeout passes.
func (k *kfollower) wait(ctx context.Context, what string, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case err := <-k.exited:
			k.exited <- err
			return fmt.Errorf("kfollower exited while the demo waited for %s: %v", what, exitStatus(err))
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %v for %s", timeout, what)
		}
	}
	return nil
}

// lineWriter writes whole lines with a prefix, and keeps a copy.
type lineWriter struct {
	prefix string
	out    io.Writer
	keep   *kfollower

	mu      sync.Mutex
	partial []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.keep.mu.Lock()
	w.keep.log.Write(p)
	w.keep.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		fmt.Fprintf(w.out, "%s%s\n", w.prefix, w.partial[:i])
		w.partial = w.partial[i+1:]
	}
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// produce writes rate records a second to demo-orders until ctx ends.
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
			r := &kgo.Record{Topic: "demo-orders", Key: fmt.Appendf(nil, "k%d", i%100), Value: fmt.Appendf(nil, `{"n":%d,"at":%q}`, i, time.Now().Format(time.RFC3339Nano))}
			cl.Produce(ctx, r, nil)
		}
	}
}
