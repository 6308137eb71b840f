package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/integration/judges"
	"github.com/kfollower/kfollower/integration/kafka"
)

// KIP-320 through kfollower: a Java consumer (Kafka's own KafkaConsumer,
// compiled here against the harness's kafka-clients jar) and a
// confluent-kafka consumer (librdkafka) read a partition from kfollower's
// --serve endpoint, both in assign mode with no automatic reset. Upstream
// the leader is killed and a replica without the last records is elected
// uncleanly; kfollower truncates them and serves a new epoch. Both
// consumers, which had read the lost records, detect the truncation at
// exactly the offset the cluster lost: the Java one with
// LogTruncationException naming it, librdkafka with its log truncation
// error.
func TestKIP320ThroughKfollower(t *testing.T) {
	ctx := context.Background()
	bin := buildKfollower(t)
	java := kip320Java(t)
	j, err := judges.Ensure()
	if err != nil {
		t.Fatal(err)
	}
	c := kafka.Start(t, kafka.Options{Layout: kafka.Isolated, NeedsFaults: true})
	const topic = "kip320"
	const n1, n2, n3 = 300, 120, 200
	lossyTopic(ctx, c, topic)
	dir := t.TempDir()
	serve := freeLoopback(t)
	kf := startChainDaemon(t, bin, "A", "--bootstrap-servers", strings.Join(c.Bootstrap(), ","), "--topics", topic,
		"--data-dir", dir, "--serve", serve, "--metadata-interval", "500ms")

	produceTo(ctx, t, c, topic, 0, "n1", n1)
	isolateLeader(ctx, c, topic)
	produceTo(ctx, t, c, topic, 0, "n2", n2)
	kf.waitStatus(t, topic, fmt.Sprintf("log end %d", n1+n2), func(s fetcher.Status) bool { return s.LogEndOffset == n1+n2 })

	script, _ := filepath.Abs(filepath.Join("testdata", "kip320", "truncation_consumer.py"))
	consumers := []*kip320Proc{
		startKIP320Proc(t, "java", append(java, serve, topic, "180")...),
		startKIP320Proc(t, "confluent-kafka", j.Python, script, serve, topic, "180"),
	}
	for _, p := range consumers {
		p.waitLine(t, fmt.Sprintf("READ %d", n1+n2), 120*time.Second)
	}

	elected := electUnclean(ctx, t, c, topic)
	// More new records than were lost: a consumer that missed the
	// truncation would read on past its old position without an error.
	produceTo(ctx, t, c, topic, 0, "n3", n3)
	kf.waitStatus(t, topic, "reconciled", func(s fetcher.Status) bool {
		return s.LeaderEpoch == elected.LeaderEpoch && s.State == "fetching" && s.LastTruncation != nil
	})

	javaOut := consumers[0].wait(t, 120*time.Second)
	if want := fmt.Sprintf("TRUNCATED %d %d", n1, n1+n2); !strings.Contains(javaOut, want) {
		t.Errorf("the Java consumer did not report LogTruncationException at %d (fetching at %d): want %q in\n%s", n1, n1+n2, want, kip320Tail(javaOut, 20))
	}
	rdOut := consumers[1].wait(t, 120*time.Second)
	var named string
	for _, line := range strings.Split(rdOut, "\n") {
		if (strings.HasPrefix(line, "ERROR") || strings.HasPrefix(line, "LOG")) && strings.Contains(strings.ToLower(line), "truncat") {
			named = line
			break
		}
	}
	// librdkafka names its position and the end offset the copy answered
	// for the position's epoch: the first offset lost.
	if want := fmt.Sprintf("end offset is %d ", n1); named == "" || !strings.Contains(named, want) {
		t.Errorf("confluent-kafka did not name the truncation at offset %d (want %q); its output:\n%s", n1, want, kip320Tail(rdOut, 20))
	}
	t.Logf("librdkafka: %s", named)
}

// kip320Java compiles TruncationConsumer.java against the kafka-clients
// jar of the version under test and returns the command that runs it.
func kip320Java(t *testing.T) []string {
	t.Helper()
	if err := kafka.CheckJava(); err != nil {
		t.Fatal(err)
	}
	lib, err := kafka.EnsureJars(kafka.Version())
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	src, _ := filepath.Abs(filepath.Join("testdata", "kip320", "TruncationConsumer.java"))
	cp := filepath.Join(lib, "*")
	if b, err := exec.Command("javac", "-cp", cp, "-d", out, src).CombinedOutput(); err != nil {
		t.Fatalf("javac TruncationConsumer.java: %v\n%s", err, b)
	}
	return []string{"java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", out + ":" + cp, "TruncationConsumer"}
}

// kip320Proc is a consumer process whose output lines are kept.
type kip320Proc struct {
	name  string
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

func startKIP320Proc(t *testing.T, name string, argv ...string) *kip320Proc {
	t.Helper()
	p := &kip320Proc{name: name, cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.cmd.Stdout // into the same pipe
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		defer close(p.done)
		s := bufio.NewScanner(stdout)
		s.Buffer(nil, 1<<20)
		for s.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, s.Text())
			p.mu.Unlock()
		}
		io.Copy(io.Discard, stdout)
		p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *kip320Proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitLine waits until the process printed want as a whole line.
func (p *kip320Proc) waitLine(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		for _, l := range p.lines {
			if l == want {
				p.mu.Unlock()
				return
			}
		}
		p.mu.Unlock()
		select {
		case <-p.done:
			t.Fatalf("%s exited before printing %q:\n%s", p.name, want, kip320Tail(p.output(), 30))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: waiting for %q:\n%s", p.name, want, kip320Tail(p.output(), 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wait waits for the process to exit and returns its output.
func (p *kip320Proc) wait(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Errorf("%s did not exit within %v", p.name, timeout)
	}
	return p.output()
}

// kip320Tail is the last n lines of s.
func kip320Tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
