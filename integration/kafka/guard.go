package kafka

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// Main is the TestMain of every package that starts Kafka:
//
//	func TestMain(m *testing.M) { kafka.Main(m) }
//
// It runs the tests, then SIGKILLs any JVM still registered (a test that
// panicked before its cleanups, or an interrupt), and checks for leaked
// goroutines. An interrupt kills the JVMs before the process exits.
func Main(m *testing.M) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-sigs:
			n := registry.killAll()
			fmt.Fprintf(os.Stderr, "kafka harness: %v: killed %d Kafka JVM(s)\n", s, n)
			os.Exit(1)
		case <-stop:
		}
	}()
	code := m.Run()
	signal.Stop(sigs)
	close(stop)
	<-done
	if n := registry.killAll(); n > 0 {
		fmt.Fprintf(os.Stderr, "kafka harness: killed %d Kafka JVM(s) left behind by the tests\n", n)
		if code == 0 {
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutine leak after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
