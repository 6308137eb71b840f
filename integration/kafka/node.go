package kafka

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Node is one Kafka JVM of a test cluster.
type Node struct {
	ID             int32
	Dir            string // everything of this node: config, data, out.log
	Port           int    // PLAINTEXT listener; 0 on a controller-only node
	ControllerPort int    // CONTROLLER listener; 0 on a broker-only node
	SSLPort        int    // SSL listener, with Options.Security.TLS; else 0
	SASLPort       int    // SASL_PLAINTEXT listener, with Options.Security.SASL; else 0

	broker, controller bool
	lib                string
	rel                release
	config             string // properties file
	heapMB             int    // a broker's -Xmx in MiB; 0 is 512

	mu     sync.Mutex // guards proc, down and paused
	proc   *process
	down   bool // killed or stopped by the test on purpose
	paused bool // SIGSTOPped by the test
}

// process is one run of a node's JVM. done is closed when it has exited.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the exit status, valid once done is closed
}

// Addr is the node's broker address, host:port.
func (n *Node) Addr() string { return fmt.Sprintf("127.0.0.1:%d", n.Port) }

// DataDir is the node's log directory (log.dirs).
func (n *Node) DataDir() string { return filepath.Join(n.Dir, "data") }

// LogFile is where the node's JVM writes its output.
func (n *Node) LogFile() string { return filepath.Join(n.Dir, "out.log") }

func (n *Node) IsBroker() bool { return n.broker }

// jvmArgs: heap sized so a 2-core / 24 GiB machine runs four JVMs with room
// to spare (docs/testing.md §6.5); the serial collector and C1 only, as on a
// 2-core machine they start faster and keep CPU for the test itself.
func (n *Node) jvmArgs(main string, args ...string) ([]string, error) {
	mainClass, err := findClass(n.lib, main)
	if err != nil {
		return nil, err
	}
	heap := []string{"-Xms256m", "-Xmx512m"}
	if n.broker && n.heapMB > 0 {
		heap = []string{fmt.Sprintf("-Xms%dm", n.heapMB/2), fmt.Sprintf("-Xmx%dm", n.heapMB)}
	}
	if !n.broker {
		heap = []string{"-Xms128m", "-Xmx256m"}
	}
	_, _, logFlag := n.rel.logConfig(n.Dir, "INFO")
	a := append(heap,
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-Djava.awt.headless=true",
		logFlag,
		"-Dkafka.logs.dir="+filepath.Join(n.Dir, "logs"),
		"-cp", filepath.Join(n.lib, "*"), // one argv element: the JVM expands it
		mainClass)
	return append(a, args...), nil
}

// writeConfig writes the node's properties and its log configuration.
func (n *Node) writeConfig(props map[string]string) error {
	if _, err := n.rel.writeLogConfig(n.Dir, "INFO"); err != nil {
		return fmt.Errorf("node %d: %w", n.ID, err)
	}
	return writeProperties(n.config, props)
}

// format runs StorageTool format for this node, with static voters (no
// --standalone: docs/testing.md §6.2) and the chosen feature levels.
func (n *Node) format(clusterID string, features []string) error {
	// --cluster-id=ID as one argument: a random id may start with '-',
	// which argparse4j would take for an option after a bare -t.
	args := []string{"format", "--cluster-id=" + clusterID, "-c", n.config}
	for _, f := range features {
		args = append(args, "--feature", f)
	}
	jargs, err := n.jvmArgs(classStorage, args...)
	if err != nil {
		return fmt.Errorf("formatting node %d: %w", n.ID, err)
	}
	cmd := exec.Command("java", jargs...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("formatting node %d (%s): %v\n%s", n.ID, strings.Join(cmd.Args, " "), err, tail(string(out), 30))
	}
	return nil
}

// start launches the node's JVM in its own process group, output appended to
// out.log. Pdeathsig has the kernel kill it if the test process dies first.
func (n *Node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil && !n.proc.exited() {
		return fmt.Errorf("starting node %d: already running (pid %d)", n.ID, n.proc.cmd.Process.Pid)
	}
	out, err := os.OpenFile(n.LogFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s: %w", n.LogFile(), err)
	}
	fmt.Fprintf(out, "==== kfollower harness: starting node %d at %s ====\n", n.ID, time.Now().Format(time.RFC3339Nano))
	jargs, err := n.jvmArgs(classBroker, n.config)
	if err != nil {
		out.Close()
		return fmt.Errorf("starting node %d: %w", n.ID, err)
	}
	cmd := exec.Command("java", jargs...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("starting node %d: %w", n.ID, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	registry.add(cmd.Process.Pid)
	// The waiter is owned by this process: it ends when the JVM exits, which
	// Kill guarantees at teardown.
	go func() {
		p.err = cmd.Wait()
		out.Close()
		registry.remove(cmd.Process.Pid)
		close(p.done)
	}()
	n.proc = p
	return nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// current returns the running process, or nil.
func (n *Node) current() *process {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil || n.proc.exited() {
		return nil
	}
	return n.proc
}

// Running reports whether the node's JVM is alive (paused counts as alive).
func (n *Node) Running() bool { return n.current() != nil }

// exitErr reports a JVM that exited although nobody stopped it.
func (n *Node) exitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil && n.proc.exited() {
		return fmt.Errorf("node %d exited: %v", n.ID, n.proc.err)
	}
	return nil
}

// signal sends sig to the node's whole process group.
func (n *Node) signal(sig syscall.Signal) (*process, error) {
	p := n.current()
	if p == nil {
		return nil, fmt.Errorf("signalling node %d with %v: not running", n.ID, sig)
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return nil, fmt.Errorf("signalling node %d (pgid %d) with %v: %w", n.ID, p.cmd.Process.Pid, sig, err)
	}
	return p, nil
}

// kill SIGKILLs the node and waits until it is gone. Killing a stopped node
// is a no-op.
func (n *Node) kill() error {
	p := n.current()
	if p == nil {
		return nil
	}
	if _, err := n.signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("node %d (pid %d) still running 30s after SIGKILL", n.ID, p.cmd.Process.Pid)
	}
}

// stop SIGTERMs the node (a controlled shutdown) and waits for it to exit,
// killing it if it takes longer than timeout.
func (n *Node) stop(timeout time.Duration) error {
	p, err := n.signal(syscall.SIGTERM)
	if err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		if err := n.kill(); err != nil {
			return err
		}
		return fmt.Errorf("node %d did not stop within %v of SIGTERM; killed", n.ID, timeout)
	}
}

// registry holds the pids of every JVM this test process started, so Main
// can kill what a crashed or interrupted test left behind.
var registry = &pids{m: map[int]bool{}}

type pids struct {
	mu sync.Mutex
	m  map[int]bool
}

func (r *pids) add(pid int)    { r.mu.Lock(); r.m[pid] = true; r.mu.Unlock() }
func (r *pids) remove(pid int) { r.mu.Lock(); delete(r.m, pid); r.mu.Unlock() }

// killAll SIGKILLs every registered process group and reports how many.
func (r *pids) killAll() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid := range r.m {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	return len(r.m)
}
