package kafka

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
)

// Standalone runs harness clusters outside `go test`, for `make demo`: the
// harness reports through a testing.TB, which Standalone stands in for.
// A failure that would fail a test (Fatal) ends the call that made it with
// an error from Do; Close tears everything down, JVMs included.
type Standalone struct {
	testing.TB // nil: only the methods below are used by the harness

	dir string
	log io.Writer

	mu       sync.Mutex // guards cleanups and failed
	cleanups []func()
	failed   bool
}

// fatal is the panic value Standalone's Fatal methods raise, caught by Do.
type fatal struct{ msg string }

// NewStandalone keeps temp dirs under dir and writes the harness's log
// lines to log.
func NewStandalone(dir string, log io.Writer) *Standalone {
	return &Standalone{dir: dir, log: log}
}

// Do runs f, returning the failure it reported with Fatal as an error.
func (s *Standalone) Do(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			ft, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			err = errors.New(ft.msg)
		}
	}()
	f()
	return nil
}

// Start starts a cluster; see the package Start.
func (s *Standalone) Start(opts Options) (c *Cluster, err error) {
	err = s.Do(func() { c = Start(s, opts) })
	return c, err
}

// Close runs the cleanups the harness registered, last first: every JVM is
// killed and waited for.
func (s *Standalone) Close() {
	s.mu.Lock()
	cs := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		_ = s.Do(cs[i])
	}
	registry.killAll()
}

func (s *Standalone) Helper()      {}
func (s *Standalone) Name() string { return "standalone" }
func (s *Standalone) Cleanup(f func()) {
	s.mu.Lock()
	s.cleanups = append(s.cleanups, f)
	s.mu.Unlock()
}

func (s *Standalone) TempDir() string {
	d, err := os.MkdirTemp(s.dir, "kafka-")
	if err != nil {
		s.Fatalf("creating a temp dir in %s: %v", s.dir, err)
	}
	s.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func (s *Standalone) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *Standalone) fail() {
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
}

func (s *Standalone) Logf(format string, args ...any) { fmt.Fprintf(s.log, format+"\n", args...) }
func (s *Standalone) Log(args ...any)                 { fmt.Fprintln(s.log, args...) }
func (s *Standalone) Errorf(format string, args ...any) {
	s.fail()
	s.Logf(format, args...)
}
func (s *Standalone) Error(args ...any) { s.fail(); s.Log(args...) }
func (s *Standalone) Fatalf(format string, args ...any) {
	s.fail()
	panic(fatal{fmt.Sprintf(format, args...)})
}
func (s *Standalone) Fatal(args ...any) { s.fail(); panic(fatal{fmt.Sprint(args...)}) }
func (s *Standalone) FailNow()          { s.fail(); panic(fatal{"failed"}) }
