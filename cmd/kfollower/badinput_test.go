package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Each bad input gets a clear message and a non-zero exit, and nothing is
// written: the data dir is not created.
func TestBadInput(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notKafka := fakeServer(t, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
	aFile := write("a-file", "x")
	badYAML := write("bad.yaml", "bootstrap-servers: 127.0.0.1:9092\ntopics: [a\ndata-dir: x\n")
	unknownKey := write("unknown.yaml", "bootstrap-servers: 127.0.0.1:9092\ntopix: a\n")
	badValue := write("badvalue.yaml", "bootstrap-servers: 127.0.0.1:9092\ntopics: a\nflush-interval: soon\n")
	notPEM := write("not.pem", "not a certificate\n")
	unreadable := filepath.Join(dir, "missing.yaml")

	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"unknown flag", nil, []string{"run", "--bootstrap-servers", "x:1", "--topics", "a", "--no-such-flag"}, 2, "unknown flag --no-such-flag"},
		{"typo'd flag", nil, []string{"run", "--bootstrap-servers", "x:1", "--topics", "a", "--metadata-intervall", "1s"}, 2, "unknown flag --metadata-intervall; did you mean --metadata-interval?"},
		{"HTTP listen without colon", nil, []string{"run", "--bootstrap-servers", "x:1", "--topics", "a", "--http-listen", "9644"}, 2, `--http-listen "9644": want host:port or :port (e.g. :9644)`},
		{"bad flag value", nil, []string{"run", "--flush", "sometimes"}, 2, `invalid value "sometimes" for flag --flush: must be one of always, interval, os`},
		{"bad fetch connection", nil, []string{"run", "--fetch-connection", "kgo"}, 2, `invalid value "kgo" for flag --fetch-connection: must be one of direct, client`},
		{"direct fetch under SASL", nil, []string{"run", "--bootstrap-servers", "x:1", "--topics", "a", "--sasl-mechanism", "PLAIN", "--sasl-username", "u", "--fetch-connection", "direct"}, 2, "--fetch-connection direct cannot be used with --sasl-mechanism PLAIN: kfollower's own Fetch connections speak no SASL"},
		{"bad duration", nil, []string{"run", "--flush-interval", "soon"}, 2, `invalid value "soon" for flag --flush-interval`},
		{"bad size", nil, []string{"run", "--retention-bytes", "lots"}, 2, `invalid value "lots" for flag --retention-bytes`},
		{"bad env value", []string{"KFOLLOWER_METADATA_INTERVAL=often"}, []string{"run", "--bootstrap-servers", "x:1", "--topics", "a"}, 2, `invalid value "often" for KFOLLOWER_METADATA_INTERVAL`},
		{"no bootstrap", nil, []string{"run", "--topics", "a"}, 2, "--bootstrap-servers is required"},
		{"no topics", nil, []string{"run", "--bootstrap-servers", "x:1"}, 2, "--topics is required"},
		{"bad topic regexp", nil, []string{"run", "--bootstrap-servers", "x:1", "--topics", "a,b(["}, 2, `"b([" is neither a topic name nor a valid regular expression`},
		{"bootstrap without port", nil, []string{"run", "--bootstrap-servers", "kafka", "--topics", "a"}, 2, `"kafka" is not host:port`},
		{"unknown command", nil, []string{"follow"}, 2, `unknown command "follow"`},
		{"unreadable config file", nil, []string{"run", "--config", unreadable}, 1, "reading config file: open " + unreadable},
		{"config file from env", []string{"KFOLLOWER_CONFIG=" + unreadable}, []string{"run"}, 1, "reading config file: open " + unreadable},
		{"invalid YAML", nil, []string{"run", "--config", badYAML}, 1, "config file " + badYAML + ": yaml: line "},
		{"unknown key in file", nil, []string{"run", "--config", unknownKey}, 1, "config file " + unknownKey + `:2: unknown key "topix"`},
		{"bad value in file", nil, []string{"run", "--config", badValue}, 1, "config file " + badValue + `:3: invalid value "soon" for flush-interval`},
		{"data dir is a file", nil, []string{"run", "--bootstrap-servers", notKafka, "--topics", "a", "--data-dir", filepath.Join(aFile, "data")}, 1, "a-file/data: not a directory"},
		{"data dir not writable", nil, []string{"run", "--bootstrap-servers", notKafka, "--topics", "a", "--data-dir", "/proc/kfollower-data"}, 1, "data dir /proc/kfollower-data is not writable"},
		{"TLS CA missing", nil, []string{"run", "--bootstrap-servers", notKafka, "--topics", "a", "--tls-ca", filepath.Join(dir, "nope.pem")}, 1, "reading --tls-ca: open"},
		{"TLS CA invalid", nil, []string{"run", "--bootstrap-servers", notKafka, "--topics", "a", "--tls-ca", notPEM}, 1, "no PEM certificate in it"},
		{"TLS key pair invalid", nil, []string{"run", "--bootstrap-servers", notKafka, "--topics", "a", "--tls-cert", notPEM, "--tls-key", notPEM}, 1, "loading --tls-cert " + notPEM},
		{"TLS cert without key", nil, []string{"run", "--bootstrap-servers", notKafka, "--topics", "a", "--tls-cert", notPEM}, 2, "--tls-cert and --tls-key go together"},
		{"SASL password file missing", nil, []string{"run", "--bootstrap-servers", notKafka, "--topics", "a", "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "u", "--sasl-password-file", filepath.Join(dir, "nope")}, 1, "reading the SASL password"},
		{"not Kafka", nil, []string{"run", "--bootstrap-servers", notKafka, "--topics", "a"}, 1, "bootstrap server " + notKafka + " does not answer as a Kafka broker"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			args := tc.args
			if args[0] == "run" && !contains(args, "--data-dir") {
				args = append(args, "--data-dir", data)
			}
			r := runBinary(t, bin, tc.env, 30*time.Second, args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and %q", r.code, r.stderr, tc.code, tc.want)
			}
			// A mistake on the command line gets its message, the
			// synopsis and where the help is: a few lines, not the
			// whole help to scroll back through.
			if tc.code == 2 && (!strings.Contains(r.stderr, "Usage:") || !strings.Contains(r.stderr, "--help") || strings.Count(r.stderr, "\n") > 4) {
				t.Fatalf("exit 2 without a short usage:\n%s", r.stderr)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Fatalf("bad input left the data dir %s behind (%v)", data, err)
			}
		})
	}
}

// A data dir another instance holds is refused before the cluster is
// contacted, naming the holder.
func TestDataDirLocked(t *testing.T) {
	bin := binary(t)
	data := t.TempDir()
	unlock, err := lockDataDir(data, true) // this test process plays the first instance
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	r := runBinary(t, bin, nil, 30*time.Second, "run", "--bootstrap-servers", "127.0.0.1:1", "--topics", "a", "--data-dir", data)
	want := "data dir " + data + " is in use by another kfollower (pid " + strconv.Itoa(os.Getpid()) + " holds"
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and %q", r.code, r.stderr, want)
	}
}

// Help and version exit 0 and print to stdout; help has examples.
func TestHelpAndVersion(t *testing.T) {
	bin := binary(t)
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"version", "--help"}} {
		r := runBinary(t, bin, nil, 10*time.Second, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "kfollower") {
			t.Fatalf("%q: exit %d, stdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
		}
		if args[0] != "--help" && !strings.Contains(r.stdout, "Example") {
			t.Fatalf("%q: no examples in\n%s", args, r.stdout)
		}
	}
	r := runBinary(t, bin, nil, 10*time.Second, "version")
	if r.code != 0 || !strings.Contains(r.stdout, "kfollower ") || !strings.Contains(r.stdout, "franz-go v") {
		t.Fatalf("version: exit %d, stdout:\n%s", r.code, r.stdout)
	}
	r = runBinary(t, bin, nil, 10*time.Second)
	if r.code != 2 || !strings.Contains(r.stderr, "Commands:") {
		t.Fatalf("no command: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// Unreachable brokers are retried and reported, not a crash; SIGTERM while
// waiting exits 0 having written nothing.
func TestUnreachableRetried(t *testing.T) {
	bin := binary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a port nobody listens on: connection refused
	data := filepath.Join(t.TempDir(), "data")
	p := startDaemon(t, bin, nil, "--bootstrap-servers", addr, "--topics", "a", "--data-dir", data)
	p.waitLog(t, "no bootstrap server reachable; retrying", 20*time.Second)
	p.waitLog(t, "attempt=2", 20*time.Second)
	code, took := p.stop(t, syscall.SIGTERM)
	if code != 0 || took > 10*time.Second {
		t.Fatalf("SIGTERM while retrying: exit %d after %v; stderr:\n%s", code, took, p.stderr())
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the data dir was created before the cluster answered (%v)", err)
	}
}

func contains(ss []string, s string) bool {
	for _, e := range ss {
		if e == s {
			return true
		}
	}
	return false
}

// fakeServer listens on loopback and answers every connection with reply,
// as a service that is not Kafka would; it stops with the test.
func fakeServer(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			c.Write([]byte(reply))
			buf := make([]byte, 512)
			c.Read(buf)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}
