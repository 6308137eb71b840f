package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/kfollower/kfollower/integration/judges"
	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The topics of TestServeSecurity and what alice's ACLs make of them.
var secTopics = []string{"pub-a", "pub-secret", "described", "hidden"}

// secACL is the same ACLs as kfollower's file and as the cluster's.
const secACL = `# alice reads pub-*, but not pub-secret, and may describe "described"
ALLOW User:alice READ TOPIC PREFIXED pub-
DENY  User:alice READ TOPIC LITERAL pub-secret
ALLOW User:alice DESCRIBE TOPIC LITERAL described
# the client certificate CN=kfollower reads pub-a
ALLOW User:kfollower READ TOPIC LITERAL pub-a
`

// TestServeSecurity runs kfollower with SASL (SCRAM and PLAIN) and an ACL
// file, and a second one with mutual TLS, over a cluster that enforces the
// same ACLs on its own SASL listener, and checks with clients no one here
// wrote (Kafka's console consumer, confluent-kafka) and franz-go that each
// principal reads exactly what its ACLs allow, that a wrong password reads
// nothing, that kfollower and the cluster give the same answers (a
// differential test), that 1,000 idle connections, a garbage client and an
// oversize request leave a reading client unharmed and are counted, and
// that an invalid ACL file leaves the old rules in force.
func TestServeSecurity(t *testing.T) {
	ctx := context.Background()
	bin := binary(t)
	pki := newTestPKI(t)
	c := kafka.Start(t, kafka.Options{
		// StandardAuthorizer, deny by default; the harness's own
		// PLAINTEXT clients (and kfollower's) are ANONYMOUS, a super user.
		Config: map[string]string{
			"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			"super.users":           "User:ANONYMOUS",
		},
		Security: &kafka.Security{SASL: &kafka.SASLListener{PlainUsers: map[string]string{"alice": "alice-pw"}}},
	})
	const n = 20
	for _, topic := range secTopics {
		c.CreateTopic(ctx, topic, [][]int32{{1, 2, 3}}, nil)
		produceN(ctx, t, c, topic, 0, n)
	}
	c.AddSCRAMUser(ctx, "SCRAM-SHA-512", "alice", "alice-pw")
	c.AddSCRAMUser(ctx, "SCRAM-SHA-256", "alice", "alice-pw")
	createACLs(ctx, t, c)

	dir := t.TempDir()
	// Written whole, by rename: the ACL watcher may read the file at any
	// moment, and os.WriteFile's truncation would show it an empty file, a
	// valid one (deny all), reloaded before the content came (the test
	// then read under no rules at all).
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p+".tmp", []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	acl := write("acl", secACL)
	creds := write("creds", "# SASL users\nalice password=alice-pw\n")
	srvCert, srvKey := write("server.pem", string(pki.ServerCertPEM)), write("server.key", string(pki.ServerKeyPEM))
	topics := strings.Join(secTopics, ",")

	saslAddr := freeAddr(t)
	ds := startDaemon(t, bin, nil, "--bootstrap-servers", strings.Join(c.Bootstrap(), ","), "--topics", topics,
		"--data-dir", filepath.Join(dir, "data-sasl"), "--serve", saslAddr, "--serve-sasl-credentials", creds,
		"--serve-acl-file", acl, "--serve-acl-reload-interval", "200ms", "--serve-max-request-bytes", "1MiB")
	tlsAddr := freeAddr(t)
	dt := startDaemon(t, bin, nil, "--bootstrap-servers", strings.Join(c.Bootstrap(), ","), "--topics", topics,
		"--data-dir", filepath.Join(dir, "data-tls"), "--serve", tlsAddr, "--serve-tls-cert", srvCert, "--serve-tls-key", srvKey,
		"--serve-tls-client-ca", pki.CAFile, "--serve-principal-mapping-rules", `RULE:^CN=(.*)$/$1/`, "--serve-acl-file", acl)
	for _, d := range []*daemon{ds, dt} {
		for _, topic := range secTopics {
			waitStatus(t, d, topic, 0, fmt.Sprintf("log end %d", n), func(s fetcher.Status) bool { return s.LogEndOffset == n })
		}
	}

	alice := kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism())
	wrong := kgo.SASL(scram.Auth{User: "alice", Pass: "wrong-pw"}.AsSha512Mechanism())
	mtls := kgo.DialTLSConfig(pki.clientTLS(t, true))

	t.Run("franz-go", func(t *testing.T) {
		for _, tc := range []struct {
			name, addr string
			opt        kgo.Opt
		}{{"SCRAM", saslAddr, alice}, {"mutual TLS", tlsAddr, mtls}} {
			if got, err := readTopic(ctx, tc.addr, "pub-a", n, tc.opt); err != nil || got != n {
				t.Errorf("%s: pub-a: %d records, %v; want %d", tc.name, got, err, n)
			}
			if got, err := readTopic(ctx, tc.addr, "pub-secret", 1, tc.opt); got != 0 || !errorIs(err, kerr.TopicAuthorizationFailed) {
				t.Errorf("%s: pub-secret: %d records, %v; want TOPIC_AUTHORIZATION_FAILED", tc.name, got, err)
			}
		}
		if _, err := kadmFor(t, saslAddr, wrong).ListTopics(ctx); !errorIs(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
		if _, err := kadmFor(t, tlsAddr, kgo.DialTLSConfig(pki.clientTLS(t, false))).ListTopics(ctx); err == nil {
			t.Error("mutual TLS without a client certificate: answered")
		}
	})

	t.Run("differential", func(t *testing.T) {
		ids := topicIDs(ctx, t, c)
		leaders := map[string]int32{}
		for _, topic := range secTopics {
			st, err := c.Partition(ctx, topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			leaders[topic] = st.Leader
		}
		fromCluster := answers(ctx, t, c.SASLBootstrap(), alice, ids, func(topic string) int32 { return leaders[topic] })
		fromKf := answers(ctx, t, []string{saslAddr}, alice, ids, func(string) int32 { return 0 })
		want := map[string]string{
			"metadata all":            "described,pub-a,pub-secret",
			"metadata pub-a":          "NONE",
			"metadata pub-secret":     "NONE", // DENY READ leaves the DESCRIBE that ALLOW READ implies
			"metadata described":      "NONE",
			"metadata hidden":         "TOPIC_AUTHORIZATION_FAILED",
			"metadata pub-nosuch":     "UNKNOWN_TOPIC_OR_PARTITION",
			"metadata nosuch":         "TOPIC_AUTHORIZATION_FAILED",
			"fetch pub-a":             "NONE",
			"fetch pub-secret":        "TOPIC_AUTHORIZATION_FAILED",
			"fetch described":         "TOPIC_AUTHORIZATION_FAILED",
			"fetch hidden":            "TOPIC_AUTHORIZATION_FAILED",
			"list_offsets pub-a":      "NONE",
			"list_offsets hidden":     "TOPIC_AUTHORIZATION_FAILED",
			"epoch pub-secret":        "NONE",
			"epoch described":         "NONE",
			"epoch hidden":            "TOPIC_AUTHORIZATION_FAILED",
			"list_offsets pub-secret": "NONE",
			"list_offsets described":  "NONE",
			"epoch pub-a":             "NONE",
		}
		for k, w := range want {
			if fromCluster[k] != w {
				t.Errorf("cluster: %s = %q, want %q", k, fromCluster[k], w)
			}
			if fromKf[k] != fromCluster[k] {
				t.Errorf("%s: kfollower %q, the cluster %q", k, fromKf[k], fromCluster[k])
			}
		}
	})

	t.Run("upstream ACLs", func(t *testing.T) {
		// The same answers with the cluster's own ACLs as the source.
		addr := freeAddr(t)
		du := startDaemon(t, bin, nil, "--bootstrap-servers", strings.Join(c.Bootstrap(), ","), "--topics", topics,
			"--data-dir", filepath.Join(dir, "data-upstream"), "--serve", addr, "--serve-sasl-credentials", creds,
			"--serve-acl-upstream", "--serve-acl-refresh", "1s")
		for _, topic := range secTopics {
			waitStatus(t, du, topic, 0, fmt.Sprintf("log end %d", n), func(s fetcher.Status) bool { return s.LogEndOffset == n })
		}
		du.waitHTTP(t, "/status", "the cluster's ACLs read", 30*time.Second, func(code int, body string) bool {
			return strings.Contains(body, `"acl_read"`)
		})
		ids := topicIDs(ctx, t, c)
		fromCluster := answers(ctx, t, c.SASLBootstrap(), alice, ids, func(topic string) int32 {
			st, err := c.Partition(ctx, topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			return st.Leader
		})
		fromKf := answers(ctx, t, []string{addr}, alice, ids, func(string) int32 { return 0 })
		for k, v := range fromCluster {
			if fromKf[k] != v {
				t.Errorf("%s: kfollower (upstream ACLs) %q, the cluster %q", k, fromKf[k], v)
			}
		}
	})

	t.Run("Java console consumer", func(t *testing.T) {
		scramProps := write("scram.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
			`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-pw";`+"\n")
		wrongProps := write("wrong.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
			`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="wrong-pw";`+"\n")
		tlsProps := write("tls.properties", "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.certificates="+propPEM(pki.CAPEM)+
			"\nssl.keystore.type=PEM\nssl.keystore.certificate.chain="+propPEM(pki.ClientCertPEM)+"\nssl.keystore.key="+propPEM(pki.ClientKeyPEM)+"\n")
		for _, tc := range []struct {
			name, addr, props, topic string
			want                     int    // records
			fail                     string // in the output when it fails
		}{
			{"SCRAM pub-a", saslAddr, scramProps, "pub-a", n, ""},
			{"SCRAM pub-secret", saslAddr, scramProps, "pub-secret", 0, "Not authorized to access topics: [pub-secret]"},
			{"SCRAM wrong password", saslAddr, wrongProps, "pub-a", 0, "SaslAuthenticationException"},
			{"mutual TLS pub-a", tlsAddr, tlsProps, "pub-a", n, ""},
			{"mutual TLS hidden", tlsAddr, tlsProps, "hidden", 0, "Not authorized to access topics: [hidden]"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out, err := kafka.RunTool(kafka.ToolConsoleConsumer, "--bootstrap-server", tc.addr, "--consumer.config", tc.props,
					"--topic", tc.topic, "--partition", "0", "--offset", "earliest", "--max-messages", strconv.Itoa(max(tc.want, 1)), "--timeout-ms", "60000")
				all := out.Stdout + out.Stderr
				if tc.fail == "" {
					if err != nil || !strings.Contains(all, fmt.Sprintf("Processed a total of %d messages", tc.want)) {
						t.Fatalf("want %d records: %v\n%s", tc.want, err, tail(all, 20))
					}
					return
				}
				// The console consumer ends on the error, exit code 0.
				if !strings.Contains(all, tc.fail) || !strings.Contains(all, "Processed a total of 0 messages") {
					t.Fatalf("want a failure with %q and no record: %v\n%s", tc.fail, err, tail(all, 20))
				}
			})
		}
	})

	t.Run("consumer groups", func(t *testing.T) {
		// Forwarded group requests need READ on the group as well (KafkaApis
		// authorizes them for the client's principal; the cluster sees
		// kfollower's): alice, allowed READ on pub-a and on group g, reads
		// pub-a in group g with Kafka's console consumer and commits in the
		// cluster; in group g2 she fails with a group authorization error
		// before the cluster hears of g2.
		gacl := write("acl-groups", secACL+"ALLOW User:alice READ GROUP LITERAL g\n")
		addr := freeAddr(t)
		dg := startDaemon(t, bin, nil, "--bootstrap-servers", strings.Join(c.Bootstrap(), ","), "--topics", "pub-a",
			"--data-dir", filepath.Join(dir, "data-groups"), "--serve", addr, "--serve-sasl-credentials", creds,
			"--serve-acl-file", gacl, "--serve-groups", "upstream")
		waitStatus(t, dg, "pub-a", 0, fmt.Sprintf("log end %d", n), func(s fetcher.Status) bool { return s.LogEndOffset == n })
		props := write("scram-groups.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
			`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-pw";`+"\n")
		consume := func(group string) string {
			out, err := kafka.RunTool(kafka.ToolConsoleConsumer, "--bootstrap-server", addr, "--consumer.config", props,
				"--topic", "pub-a", "--group", group, "--from-beginning", "--max-messages", strconv.Itoa(n), "--timeout-ms", "60000")
			all := out.Stdout + out.Stderr
			if err != nil {
				all += "\n" + err.Error()
			}
			return all
		}

		if out := consume("g"); !strings.Contains(out, fmt.Sprintf("Processed a total of %d messages", n)) {
			t.Fatalf("group g: want %d records:\n%s", n, tail(out, 20))
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			offs, err := c.Admin().FetchOffsets(ctx, "g")
			o, ok := offs.Lookup("pub-a", 0)
			if err == nil && ok && o.At == n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("group g's offset of pub-a in the cluster: %+v %v (%v), want %d", o, ok, err, n)
			}
			time.Sleep(200 * time.Millisecond)
		}

		out := consume("g2")
		if !strings.Contains(out, "Not authorized to access group") || !strings.Contains(out, "Processed a total of 0 messages") {
			t.Fatalf("group g2: want a group authorization failure and no record:\n%s", tail(out, 20))
		}
		offs, err := c.Admin().FetchOffsets(ctx, "g2")
		if err != nil && !errorIs(err, kerr.GroupIDNotFound) {
			t.Fatalf("the cluster's offsets of g2: %v", err)
		}
		if len(offs) != 0 {
			t.Errorf("the cluster has offsets for g2: %+v", offs)
		}
		lg, err := c.Admin().ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := lg["g2"]; ok {
			t.Errorf("the cluster knows group g2: %+v", lg["g2"])
		}
		body := dg.waitHTTP(t, "/metrics", "the group denial counted", 10*time.Second, func(code int, body string) bool {
			return metric(body, `kfollower_serve_authorization_denials_total{operation="DESCRIBE",resource_type="GROUP"}`) >= 1
		})
		if v := metric(body, `kfollower_serve_authorization_denials_total{operation="READ",resource_type="GROUP"}`); v > 0 { // -1: no series
			t.Errorf("%v READ GROUP denials, want none: the consumer never got past FindCoordinator", v)
		}
		if out := dg.stderr(); !strings.Contains(out, "principal=User:alice operation=DESCRIBE resource_type=GROUP resource=g2") {
			t.Errorf("the audit log has no denial of group g2:\n%s", tail(out, 20))
		}
	})

	t.Run("confluent-kafka", func(t *testing.T) {
		j, err := judges.Ensure()
		if err != nil {
			t.Fatal(err)
		}
		caFile := pki.CAFile
		scramConf := map[string]any{"bootstrap.servers": saslAddr, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
			"sasl.username": "alice", "sasl.password": "alice-pw"}
		wrongConf := map[string]any{"bootstrap.servers": saslAddr, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
			"sasl.username": "alice", "sasl.password": "wrong-pw"}
		tlsConf := map[string]any{"bootstrap.servers": tlsAddr, "security.protocol": "SSL", "ssl.ca.location": caFile,
			"ssl.certificate.location": pki.ClientCert, "ssl.key.location": pki.ClientKey}
		// librdkafka keeps a partition's TOPIC_AUTHORIZATION_FAILED to
		// itself while it retries (no consumer error for an assigned
		// partition): a denied topic is checked by reading nothing for
		// 10 s and by its absence from Metadata.
		for _, tc := range []struct {
			name   string
			conf   map[string]any
			topic  string
			want   int
			err    string
			topics string // Metadata's topics
		}{
			{"SCRAM pub-a", scramConf, "pub-a", n, "", "described,pub-a,pub-secret"},
			{"SCRAM hidden", scramConf, "hidden", 0, "", "described,pub-a,pub-secret"},
			{"SCRAM wrong password", wrongConf, "pub-a", 0, "_AUTHENTICATION", ""},
			{"mutual TLS pub-a", tlsConf, "pub-a", n, "", "pub-a"},
			{"mutual TLS pub-secret", tlsConf, "pub-secret", 0, "", "pub-a"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				// Side by side: three of them read nothing for 10 s.
				t.Parallel()
				wait := time.Minute
				if tc.want == 0 {
					wait = 10 * time.Second
				}
				got := confluentRead(t, j.Python, tc.conf, tc.topic, max(tc.want, 1), wait, tc.topics != "")
				if got.Records != tc.want || !strings.Contains(got.Error, tc.err) || tc.err == "" && got.Error != "" {
					t.Fatalf("%d records, error %q; want %d and %q", got.Records, got.Error, tc.want, tc.err)
				}
				if tc.topics != "" && strings.Join(got.Topics, ",") != tc.topics {
					t.Errorf("Metadata lists %v, want %s", got.Topics, tc.topics)
				}
			})
		}
	})

	t.Run("bad clients", func(t *testing.T) {
		// A consumer keeps reading new records while 1,000 connections
		// sit idle, a client sends garbage and another a request above
		// the limit.
		rss0 := rssKiB(t, ds)
		cl, err := kgo.NewClient(kgo.SeedBrokers(saslAddr), alice,
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"pub-a": {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var idle []net.Conn
		defer func() {
			for _, c := range idle {
				c.Close()
			}
		}()
		for range 1000 {
			c, err := net.Dial("tcp", saslAddr)
			if err != nil {
				t.Fatalf("idle connection %d: %v", len(idle), err)
			}
			idle = append(idle, c)
		}
		for _, junk := range [][]byte{
			[]byte("\x00\x00\x00\x0cGET / HTTP/1.1\r\n"), // garbage: no request key served before authentication
			{0x7f, 0xff, 0xff, 0xff},                     // a 2 GiB request
			{0, 0x20, 0, 0},                              // 2 MiB: above --serve-max-request-bytes and the SASL limit
		} {
			c, err := net.Dial("tcp", saslAddr)
			if err != nil {
				t.Fatal(err)
			}
			c.Write(junk)
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Errorf("%q answered", junk)
			}
			c.Close()
		}
		produceN(ctx, t, c, "pub-a", n, 50)
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		for got := 0; got < n+50; {
			fs := cl.PollFetches(cctx)
			if cctx.Err() != nil {
				t.Fatalf("the reading client got %d of %d records", got, n+50)
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("the reading client: %v", err) })
			got += fs.NumRecords()
		}
		body := ds.waitHTTP(t, "/metrics", "the bad clients counted", 30*time.Second, func(code int, body string) bool {
			return metric(body, `kfollower_serve_connections_closed_total{reason="frame_size"}`) == 2 &&
				metric(body, `kfollower_serve_connections_closed_total{reason="before_authentication"}`) == 1 &&
				metric(body, "kfollower_serve_connections_open") >= 1001
		})
		if v := metric(body, `kfollower_serve_requests_total{api="fetch",error="NONE"}`); v < 1 {
			t.Errorf("no Fetch counted:\n%s", body)
		}
		var st struct {
			Serve serveStatus `json:"serve"`
		}
		_, sbody, _ := ds.get("/status")
		if json.Unmarshal([]byte(sbody), &st); st.Serve.OpenConnections < 1001 {
			t.Errorf("/status open_connections %d, want at least 1001", st.Serve.OpenConnections)
		}
		if rss := rssKiB(t, ds); rss-rss0 > 128<<10 {
			t.Errorf("resident memory grew from %d KiB to %d KiB with 1,000 idle connections", rss0, rss)
		}
	})

	t.Run("ACL file reload", func(t *testing.T) {
		// An invalid change: the old rules stay, and /status and the log
		// say what is wrong and where.
		write("acl", "ALLOW User:alice READ TOPIC PREFIXED pub-\nALLOW User:alice REED TOPIC LITERAL hidden\n")
		ds.waitHTTP(t, "/status", "the ACL error", 30*time.Second, func(code int, body string) bool {
			return strings.Contains(body, acl+`:2: operation \"REED\"`)
		})
		ds.waitLog(t, "ACL file rejected; the previous rules stay in force", 10*time.Second)
		if got, err := readTopic(ctx, saslAddr, "pub-a", n, alice); err != nil || got != n {
			t.Fatalf("after an invalid ACL file: pub-a: %d records, %v", got, err)
		}
		if _, err := readTopic(ctx, saslAddr, "hidden", 1, alice); !errorIs(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("after an invalid ACL file: hidden: %v", err)
		}
		// A valid one takes over.
		write("acl", "ALLOW User:alice READ TOPIC LITERAL hidden\n")
		ds.waitLog(t, "ACL file reloaded", 30*time.Second)
		if got, err := readTopic(ctx, saslAddr, "hidden", n, alice); err != nil || got != n {
			t.Fatalf("after the new ACL file: hidden: %d records, %v", got, err)
		}
		if _, err := readTopic(ctx, saslAddr, "pub-a", 1, alice); !errorIs(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("after the new ACL file: pub-a: %v", err)
		}
	})

	// The audit trail names the principals and failures, never a password.
	for _, d := range []*daemon{ds, dt} {
		if out := d.stderr(); strings.Contains(out, "alice-pw") || strings.Contains(out, "wrong-pw") {
			t.Error("a password reached the log")
		}
	}
	out := ds.stderr()
	for _, want := range []string{`msg="authentication failed"`, "audit=true", `mechanism=SCRAM-SHA-512 user=alice`, `msg="authorization denied"`, "principal=User:alice operation=READ resource_type=TOPIC resource=pub-secret"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log has no %q", want)
		}
	}
	if out := dt.stderr(); !strings.Contains(out, "principal=User:kfollower") {
		t.Error("the mutual TLS principal is not in the audit log")
	}
}

// produceN writes records "v<i>" for i in [from, from+count) to topic-0.
func produceN(ctx context.Context, t *testing.T, c *kafka.Cluster, topic string, from, count int) {
	t.Helper()
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	defer cl.Close()
	var rs []*kgo.Record
	for i := from; i < from+count; i++ {
		rs = append(rs, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "v%d", i)})
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := cl.ProduceSync(pctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing to %s: %v", topic, err)
	}
}

// createACLs gives the cluster secACL's entries, and waits until its SASL
// listener enforces them.
func createACLs(ctx context.Context, t *testing.T, c *kafka.Cluster) {
	t.Helper()
	adm := c.Admin()
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").Topics("pub-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead),
		kadm.NewACLs().Deny("User:alice").Topics("pub-secret").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead),
		kadm.NewACLs().Allow("User:alice").Topics("described").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpDescribe),
		kadm.NewACLs().Allow("User:kfollower").Topics("pub-a").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead),
	} {
		res, err := adm.CreateACLs(ctx, b.AllowHosts().DenyHosts())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("creating ACL %+v: %v", r, r.Err)
			}
		}
	}
	alice := kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism())
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := readTopic(ctx, c.SASLBootstrap()[0], "pub-a", 1, alice)
		if err == nil && got == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster does not let alice read pub-a: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readTopic reads want records of topic-0 from the start (it reports no
// more than want), or returns the first error a fetch or the client
// reports.
func readTopic(ctx context.Context, addr, topic string, want int, opts ...kgo.Opt) (int, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(2), kgo.RetryTimeout(5 * time.Second),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})}, opts...)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got := 0
	for got < want {
		// kgo keeps an authentication or authorization failure from the
		// fetch loop to itself; a Metadata for the topic shows it.
		fs := cl.PollFetches(cctx)
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil && cctx.Err() == nil {
			return got, ferr
		}
		got = min(want, got+fs.NumRecords())
		if cctx.Err() != nil {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			mctx, mcancel := context.WithTimeout(ctx, 10*time.Second)
			defer mcancel()
			resp, err := cl.Request(mctx, req)
			if err != nil {
				return got, err
			}
			if mt := resp.(*kmsg.MetadataResponse).Topics; len(mt) == 1 && mt[0].ErrorCode != 0 {
				return got, kerr.ErrorForCode(mt[0].ErrorCode)
			}
			return got, cctx.Err()
		}
	}
	return got, nil
}

func errorIs(err error, want *kerr.Error) bool {
	return err != nil && strings.Contains(err.Error(), want.Message)
}

func kadmFor(t *testing.T, addr string, opts ...kgo.Opt) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// clientTLS trusts the test CA and, with cert, presents the client
// certificate (CN=kfollower).
func (p *testPKI) clientTLS(t *testing.T, cert bool) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CAPEM)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert {
		kp, err := tls.X509KeyPair(p.ClientCertPEM, p.ClientKeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return cfg
}

func topicIDs(ctx context.Context, t *testing.T, c *kafka.Cluster) map[string][16]byte {
	t.Helper()
	td, err := c.Admin().ListTopics(ctx, secTopics...)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string][16]byte{}
	for _, d := range td {
		ids[d.Topic] = d.ID
	}
	return ids
}

// answers asks the same questions of one endpoint as alice: which topics
// Metadata lists, and the error of Metadata by name, Fetch, ListOffsets
// and OffsetForLeaderEpoch for each topic, each sent to the topic's
// leader.
func answers(ctx context.Context, t *testing.T, seeds []string, auth kgo.Opt, ids map[string][16]byte, leader func(string) int32) map[string]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), auth, kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ask := func(broker int32, req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Broker(int(broker)).Request(rctx, req)
		if err != nil {
			t.Fatalf("%s to broker %d: %v", kmsg.NameForKey(req.Key()), broker, err)
		}
		return resp
	}
	name := func(code int16) string {
		if code == 0 {
			return "NONE"
		}
		return kerr.ErrorForCode(code).(*kerr.Error).Message
	}
	out := map[string]string{}
	first := leader(secTopics[0])
	md := ask(first, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	var listed []string
	for _, mt := range md.Topics {
		for _, s := range secTopics {
			if mt.Topic != nil && *mt.Topic == s {
				listed = append(listed, s)
			}
		}
	}
	slices.Sort(listed)
	out["metadata all"] = strings.Join(listed, ",")
	byName := kmsg.NewPtrMetadataRequest()
	byName.AllowAutoTopicCreation = false
	for _, s := range append(append([]string{}, secTopics...), "pub-nosuch", "nosuch") {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(s)
		byName.Topics = append(byName.Topics, rt)
	}
	for _, mt := range ask(first, byName).(*kmsg.MetadataResponse).Topics {
		out["metadata "+*mt.Topic] = name(mt.ErrorCode)
	}
	for _, topic := range secTopics {
		b := leader(topic)
		f := kmsg.NewPtrFetchRequest()
		f.MaxBytes = 1 << 20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = topic, ids[topic]
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		f.Topics = append(f.Topics, ft)
		out["fetch "+topic] = name(ask(b, f).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode)

		lo := kmsg.NewPtrListOffsetsRequest()
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = topic
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp = -1
		lt.Partitions = append(lt.Partitions, lp)
		lo.Topics = append(lo.Topics, lt)
		out["list_offsets "+topic] = name(ask(b, lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode)

		oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
		ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
		ot.Topic = topic
		op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		ot.Partitions = append(ot.Partitions, op)
		oe.Topics = append(oe.Topics, ot)
		out["epoch "+topic] = name(ask(b, oe).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode)
	}
	return out
}

// confluentResult is what confluentRead's script prints.
type confluentResult struct {
	Records int      `json:"records"`
	Error   string   `json:"error"`
	Topics  []string `json:"topics"` // Metadata's
}

const confluentScript = `
import json, sys, time
from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING, KafkaError
conf = json.loads(sys.argv[1]); topic = sys.argv[2]; want = int(sys.argv[3]); wait = float(sys.argv[4])
errors = []
conf.update({"group.id": "unused", "enable.auto.commit": False, "error_cb": lambda e: errors.append(e.name())})
c = Consumer(conf)
topics = []
if sys.argv[5] == "list":
    # Not for a client refused: list_topics would wait out its timeout.
    try:
        topics = sorted(t for t in c.list_topics(timeout=20).topics)
    except Exception as e:
        pass
c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
n, err, deadline = 0, None, time.time() + wait
while n < want and time.time() < deadline and err is None:
    m = c.poll(0.5)
    # GROUP_AUTHORIZATION_FAILED is FindCoordinator's, which librdkafka
    # asks with any group.id even when it only assigns: kfollower serves
    # no groups, and refuses it so.
    bad = [e for e in errors if e not in ("_TRANSPORT", "_ALL_BROKERS_DOWN", "GROUP_AUTHORIZATION_FAILED")]
    if bad:
        err = bad[0]
    if m is None:
        continue
    if m.error():
        if m.error().code() not in (KafkaError._PARTITION_EOF, KafkaError.GROUP_AUTHORIZATION_FAILED):
            err = m.error().name()
        continue
    n += 1
c.close()
print(json.dumps({"records": n, "error": err or "", "topics": topics}))
`

// confluentRead reads up to want records of topic-0 with confluent-kafka
// for at most wait; list has it list the topics first.
func confluentRead(t *testing.T, python string, conf map[string]any, topic string, want int, wait time.Duration, list bool) confluentResult {
	t.Helper()
	b, _ := json.Marshal(conf)
	listing := "no-list"
	if list {
		listing = "list"
	}
	r := runBinary(t, python, nil, 2*time.Minute, "-c", confluentScript, string(b), topic, strconv.Itoa(want), strconv.FormatFloat(wait.Seconds(), 'f', 1, 64), listing)
	var got confluentResult
	if r.code != 0 || json.Unmarshal([]byte(lastLine(r.stdout)), &got) != nil {
		t.Fatalf("confluent-kafka: exit %d\n%s\n%s", r.code, r.stdout, tail(r.stderr, 20))
	}
	return got
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// propPEM writes PEM as one properties value (Properties.load turns \n
// back into newlines).
func propPEM(b []byte) string {
	return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", `\n`)
}

// metric is the value of one series in a /metrics body, -1 if absent.
func metric(body, series string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// rssKiB is the daemon's resident memory.
func rssKiB(t *testing.T, d *daemon) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no VmRSS")
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}
