package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// daemon is a running `kfollower run` process.
type daemon struct {
	cmd  *exec.Cmd
	http string // base URL
	done chan struct{}
	err  error // valid once done is closed

	mu  sync.Mutex // guards out
	out bytes.Buffer
}

// lockedWriter lets the process write stderr while tests read it.
type lockedWriter struct{ d *daemon }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	return w.d.out.Write(p)
}

// startDaemon runs `kfollower run` with args plus an HTTP listener on a free
// loopback port; the test's cleanup kills it if it is still running.
func startDaemon(t *testing.T, bin string, env []string, args ...string) *daemon {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	d := &daemon{http: "http://" + addr, done: make(chan struct{})}
	d.cmd = exec.Command(bin, append([]string{"run", "--http-listen", addr, "--progress-interval", "2s"}, args...)...)
	d.cmd.Env = append(cleanEnv(), env...)
	d.cmd.Stdout, d.cmd.Stderr = lockedWriter{d}, lockedWriter{d}
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting kfollower: %v", err)
	}
	// The waiter is owned by the daemon and ends when the process exits,
	// which the cleanup guarantees.
	go func() {
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			d.cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			t.Logf("---- kfollower output ----\n%s", tail(d.stderr(), 80))
		}
	})
	return d
}

func (d *daemon) stderr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
}

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// waitLog waits until the output contains s.
func (d *daemon) waitLog(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(d.stderr(), s) {
		if d.exited() {
			t.Fatalf("kfollower exited (%v) before logging %q:\n%s", d.err, s, tail(d.stderr(), 40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("kfollower did not log %q within %v:\n%s", s, timeout, tail(d.stderr(), 40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends sig and waits at most 30 s; it returns the exit code and how
// long the exit took.
func (d *daemon) stop(t *testing.T, sig syscall.Signal) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signalling kfollower: %v", err)
	}
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("kfollower still running 30 s after %v:\n%s", sig, tail(d.stderr(), 40))
	}
	return d.cmd.ProcessState.ExitCode(), time.Since(start)
}

// get fetches path from the daemon's HTTP listener.
func (d *daemon) get(path string) (int, string, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(d.http + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitHTTP polls path until cond holds for its status and body.
func (d *daemon) waitHTTP(t *testing.T, path, what string, timeout time.Duration, cond func(code int, body string) bool) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		code, body, err := d.get(path)
		if err == nil && cond(code, body) {
			return body
		}
		last = fmt.Sprintf("%d %v %s", code, err, tail(body, 20))
		if d.exited() {
			t.Fatalf("kfollower exited (%v) while waiting for %s:\n%s", d.err, what, tail(d.stderr(), 40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %v for %s on %s; last: %s", timeout, what, path, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
