package server

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kfollower/kfollower/authz"
	"github.com/kfollower/kfollower/internal/testcert"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// recorder is an Observer that counts.
type recorder struct {
	mu       sync.Mutex
	open     int
	rejected map[string]int
	bad      map[string]int
	requests map[int16]map[int16]int // key → error code → count
	auth     map[string]int          // "MECH ok" / "MECH failed"
	denied   map[string]int          // "OP TYPE"
}

func newRecorder() *recorder {
	return &recorder{rejected: map[string]int{}, bad: map[string]int{}, requests: map[int16]map[int16]int{}, auth: map[string]int{}, denied: map[string]int{}}
}

func (r *recorder) Opened()                { r.mu.Lock(); r.open++; r.mu.Unlock() }
func (r *recorder) Closed()                { r.mu.Lock(); r.open--; r.mu.Unlock() }
func (r *recorder) Rejected(reason string) { r.mu.Lock(); r.rejected[reason]++; r.mu.Unlock() }
func (r *recorder) BadInput(reason string) { r.mu.Lock(); r.bad[reason]++; r.mu.Unlock() }
func (r *recorder) Request(key, code int16, _ time.Duration, _ int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.requests[key] == nil {
		r.requests[key] = map[int16]int{}
	}
	r.requests[key][code]++
}
func (r *recorder) Authenticated(mech string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ok {
		r.auth[mech+" ok"]++
	} else {
		r.auth[mech+" failed"]++
	}
}
func (r *recorder) Denied(op authz.Operation, rt authz.ResourceType) {
	r.mu.Lock()
	r.denied[op.String()+" "+rt.String()]++
	r.mu.Unlock()
}

func (r *recorder) get(f func(*recorder) int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return f(r)
}

// secCatalog serves "t" (3 batches) and "secret" (1 batch), one
// partition each.
func secCatalog(t *testing.T) *testCatalog {
	cat := newCatalog()
	cat.add("t", 1, 1)
	cat.add("secret", 2, 1)
	cat.serve("t", 0, openLog(t, "t", 0, false, run(0, 0, 3, 2)), 0)
	cat.serve("secret", 0, openLog(t, "secret", 0, false, run(0, 0, 1, 1)), 0)
	return cat
}

const testACL = `
ALLOW User:alice READ TOPIC LITERAL t
ALLOW User:alice DESCRIBE CLUSTER LITERAL kafka-cluster
ALLOW User:bob   READ TOPIC PREFIXED s
DENY  User:bob   READ TOPIC LITERAL secret
`

func testCreds(t *testing.T) *authz.Credentials {
	c, err := authz.ParseCredentials("creds", []byte("alice password=alice-pw\nbob password=bob-pw\n"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testRules(t *testing.T) *authz.Rules {
	r, err := authz.ParseACLs("acl", []byte(testACL))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// readAll reads topic from the start to its end with a kgo consumer and
// returns the records read, or the first error.
func readAll(t *testing.T, addr, topic string, n int, opts ...kgo.Opt) (int, error) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(100 * time.Millisecond), kgo.RetryTimeout(time.Second), kgo.RequestRetries(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return got, ctx.Err()
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return got, ferr
		}
		got += fs.NumRecords()
	}
	return got, nil
}

// request sends one request through an authenticated kgo client straight
// to the server's node (no sharding by kgo's metadata), at the highest
// version both take, Metadata at v10 at most (the last with cluster
// authorized operations).
func request(t *testing.T, addr string, req kmsg.Request, opts ...kgo.Opt) (kmsg.Response, error) {
	t.Helper()
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(3, 10)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.MaxVersions(vs)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cl.Broker(7).Request(ctx, req)
}

// checkDenied: alice (READ t only) sees only t in Metadata; secret is
// TOPIC_AUTHORIZATION_FAILED by name, by id, in Fetch, ListOffsets and
// OffsetForLeaderEpoch.
func checkDenied(t *testing.T, addr string, cat *testCatalog, opts ...kgo.Opt) {
	t.Helper()
	all := kmsg.NewPtrMetadataRequest()
	all.IncludeTopicAuthorizedOperations, all.IncludeClusterAuthorizedOperations = true, true
	all.Version = 10
	resp, err := request(t, addr, all, opts...)
	if err != nil {
		t.Fatal(err)
	}
	md := resp.(*kmsg.MetadataResponse)
	if len(md.Topics) != 1 || *md.Topics[0].Topic != "t" || md.Topics[0].AuthorizedOperations != aclRead|aclDescribe {
		t.Errorf("Metadata for all topics: %+v, want t alone with READ and DESCRIBE", md.Topics)
	}
	if md.AuthorizedOperations != aclDescribe {
		t.Errorf("cluster authorized operations %d, want DESCRIBE", md.AuthorizedOperations)
	}
	byName := kmsg.NewPtrMetadataRequest()
	for _, n := range []string{"secret", "no-such-topic", "t"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		byName.Topics = append(byName.Topics, rt)
	}
	resp, err = request(t, addr, byName, opts...)
	if err != nil {
		t.Fatal(err)
	}
	md = resp.(*kmsg.MetadataResponse)
	want := []int16{kerr.TopicAuthorizationFailed.Code, kerr.TopicAuthorizationFailed.Code, 0}
	for i, mt := range md.Topics {
		if mt.ErrorCode != want[i] || mt.ErrorCode != 0 && mt.TopicID != ([16]byte{}) {
			t.Errorf("Metadata by name %s: error %d id %x, want %d and no id", *mt.Topic, mt.ErrorCode, mt.TopicID, want[i])
		}
	}
	byID := kmsg.NewPtrMetadataRequest() // v10 by request's cap: a name is "" for null
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = cat.id("secret")
	byID.Topics = append(byID.Topics, rt)
	resp, err = request(t, addr, byID, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if mt := resp.(*kmsg.MetadataResponse).Topics[0]; mt.ErrorCode != kerr.TopicAuthorizationFailed.Code || mt.Topic != nil && *mt.Topic != "" || mt.TopicID != cat.id("secret") {
		t.Errorf("Metadata by id of secret: error %d name %v id %x, want TOPIC_AUTHORIZATION_FAILED, no name, the id", mt.ErrorCode, mt.Topic, mt.TopicID)
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.MaxBytes = 12, 1<<20
	for _, n := range []string{"secret", "t"} {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = n, cat.id(n)
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		fetch.Topics = append(fetch.Topics, ft)
	}
	resp, err = request(t, addr, fetch, opts...)
	if err != nil {
		t.Fatal(err)
	}
	fr := resp.(*kmsg.FetchResponse)
	if p := fr.Topics[0].Partitions[0]; p.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(p.RecordBatches) != 0 {
		t.Errorf("Fetch secret: error %d, %d record bytes; want TOPIC_AUTHORIZATION_FAILED and none", p.ErrorCode, len(p.RecordBatches))
	}
	if p := fr.Topics[1].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Errorf("Fetch t: error %d, %d record bytes", p.ErrorCode, len(p.RecordBatches))
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "secret"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	resp, err = request(t, addr, lo, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.TopicAuthorizationFailed.Code || p.Offset != -1 {
		t.Errorf("ListOffsets secret: error %d offset %d", p.ErrorCode, p.Offset)
	}
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "secret"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	ot.Partitions = append(ot.Partitions, op)
	oe.Topics = append(oe.Topics, ot)
	resp, err = request(t, addr, oe, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.TopicAuthorizationFailed.Code || p.EndOffset != -1 {
		t.Errorf("OffsetForLeaderEpoch secret: error %d end %d", p.ErrorCode, p.EndOffset)
	}
}

// SASL with franz-go's own client mechanisms: each authenticates, reads
// exactly what the ACLs allow; a wrong password reads nothing.
func TestSASL(t *testing.T) {
	cat := secCatalog(t)
	rec := newRecorder()
	_, addr := testServer(t, cat, func(c *Config) {
		c.SASL, c.Authorizer, c.Observer, c.Logger = testCreds(t), testRules(t), rec, quiet
		c.FailedAuthDelay = -1
	})
	for _, m := range []sasl.Mechanism{
		scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism(),
		scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism(),
		plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism(),
	} {
		t.Run(m.Name(), func(t *testing.T) {
			if n, err := readAll(t, addr, "t", 6, kgo.SASL(m)); err != nil || n != 6 {
				t.Fatalf("read %d records of t: %v", n, err)
			}
			checkDenied(t, addr, cat, kgo.SASL(m))
		})
	}
	// bob may read s* but is denied secret: DENY wins.
	bob := kgo.SASL(scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha512Mechanism())
	if n, err := readAll(t, addr, "secret", 1, bob); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("bob reading secret: %d records, %v; want TOPIC_AUTHORIZATION_FAILED", n, err)
	}
	for _, m := range []sasl.Mechanism{
		scram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism(),
		scram.Auth{User: "mallory", Pass: "x"}.AsSha512Mechanism(),
		plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism(),
	} {
		_, err := request(t, addr, kmsg.NewPtrMetadataRequest(), kgo.SASL(m))
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s with a wrong password: %v; want SASL_AUTHENTICATION_FAILED", m.Name(), err)
		}
	}
	if got := rec.get(func(r *recorder) int {
		return r.auth["SCRAM-SHA-256 failed"] + r.auth["SCRAM-SHA-512 failed"] + r.auth["PLAIN failed"]
	}); got < 3 {
		t.Errorf("%d failed authentications counted, want at least 3 (%v)", got, rec.auth)
	}
	if got := rec.get(func(r *recorder) int { return r.auth["SCRAM-SHA-256 ok"] }); got == 0 {
		t.Errorf("no SCRAM-SHA-256 success counted: %v", rec.auth)
	}
	if got := rec.get(func(r *recorder) int { return r.denied["READ TOPIC"] + r.denied["DESCRIBE TOPIC"] }); got == 0 {
		t.Errorf("no denial counted: %v", rec.denied)
	}
	if got := rec.get(func(r *recorder) int { return r.requests[1][kerr.TopicAuthorizationFailed.Code] }); got == 0 {
		t.Errorf("no Fetch answered TOPIC_AUTHORIZATION_FAILED counted: %v", rec.requests)
	}
}

// The SASL state machine on the wire, as SaslServerAuthenticator runs it.
func TestSASLWire(t *testing.T) {
	rec := newRecorder()
	_, addr := testServer(t, secCatalog(t), func(c *Config) {
		c.SASL, c.Authorizer, c.Observer, c.Logger = testCreds(t), testRules(t), rec, quiet
		c.MaxAuthBytes = 1 << 10
	})
	handshake := func(c *client, v int16, mech string) *kmsg.SASLHandshakeResponse {
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Version, r.Mechanism = v, mech
		return c.do(r).(*kmsg.SASLHandshakeResponse)
	}
	authenticate := func(c *client, v int16, b []byte) *kmsg.SASLAuthenticateResponse {
		r := kmsg.NewPtrSASLAuthenticateRequest()
		r.Version, r.SASLAuthBytes = v, b
		return c.do(r).(*kmsg.SASLAuthenticateResponse)
	}

	t.Run("request before authentication", func(t *testing.T) {
		c := dial(t, addr)
		if r := c.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
			t.Fatalf("ApiVersions before authentication: %d", r.ErrorCode)
		}
		c.send(kmsg.NewPtrMetadataRequest())
		c.closed()
	})
	t.Run("authenticate before handshake", func(t *testing.T) {
		c := dial(t, addr)
		r := kmsg.NewPtrSASLAuthenticateRequest()
		c.send(r)
		c.closed()
	})
	t.Run("unsupported mechanism", func(t *testing.T) {
		c := dial(t, addr)
		r := handshake(c, 1, "GSSAPI")
		if r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || !strings.Contains(strings.Join(r.SupportedMechanisms, ","), "SCRAM-SHA-512") {
			t.Errorf("GSSAPI: %+v", r)
		}
		c.closed()
	})
	t.Run("wrong password", func(t *testing.T) {
		c := dial(t, addr)
		if r := handshake(c, 1, "PLAIN"); r.ErrorCode != 0 {
			t.Fatal(r.ErrorCode)
		}
		r := authenticate(c, 2, []byte("\x00alice\x00nope"))
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "Invalid username or password") {
			t.Errorf("wrong password: %d %v", r.ErrorCode, r.ErrorMessage)
		}
		c.closed()
	})
	t.Run("authenticated, then SASL again", func(t *testing.T) {
		c := dial(t, addr)
		handshake(c, 1, "PLAIN")
		if r := authenticate(c, 1, []byte("\x00alice\x00alice-pw")); r.ErrorCode != 0 || r.SessionLifetimeMillis != 0 {
			t.Fatalf("PLAIN: %+v", r)
		}
		if r := handshake(c, 1, "PLAIN"); r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Errorf("second handshake: %d", r.ErrorCode)
		}
		if r := authenticate(c, 0, nil); r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Errorf("second authenticate: %d", r.ErrorCode)
		}
		if md := c.do(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse); len(md.Topics) != 1 {
			t.Errorf("Metadata after authenticating: %d topics, want 1", len(md.Topics))
		}
	})
	t.Run("handshake v0, bare tokens", func(t *testing.T) {
		c := dial(t, addr)
		if r := handshake(c, 0, "PLAIN"); r.ErrorCode != 0 {
			t.Fatal(r.ErrorCode)
		}
		tok := []byte("\x00alice\x00alice-pw")
		c.write(append([]byte{0, 0, 0, byte(len(tok))}, tok...))
		if b, err := c.readFrame(); err != nil || len(b) != 0 {
			t.Fatalf("answer to the bare token: %q %v, want an empty token", b, err)
		}
		if md := c.do(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse); len(md.Topics) != 1 {
			t.Errorf("Metadata after authenticating: %d topics, want 1", len(md.Topics))
		}
	})
	t.Run("oversize before authentication", func(t *testing.T) {
		c := dial(t, addr)
		c.write([]byte{0, 0, 8, 0}) // 2 KiB, above MaxAuthBytes
		c.closed()
	})
	// Another client is not affected by any of it.
	if n, err := readAll(t, addr, "t", 6, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism())); err != nil || n != 6 {
		t.Fatalf("after the bad clients: %d records, %v", n, err)
	}
	waitFor(t, func() bool { return rec.get(func(r *recorder) int { return r.bad[BadFrameSize] }) == 1 })
	if got := rec.get(func(r *recorder) int { return r.bad[BadBeforeAuth] }); got != 2 {
		t.Errorf("%d closed before authentication, want 2 (%v)", got, rec.bad)
	}
	if got := rec.get(func(r *recorder) int { return r.bad[BadAuthFailed] }); got != 2 {
		t.Errorf("%d closed for failed authentication, want 2 (%v)", got, rec.bad)
	}
}

// Without SASL, the SASL keys answer ILLEGAL_SASL_STATE.
func TestSASLOff(t *testing.T) {
	_, addr := testServer(t, secCatalog(t))
	c := dial(t, addr)
	if r := c.do(kmsg.NewPtrSASLHandshakeRequest()).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("SaslHandshake: %d", r.ErrorCode)
	}
	if r := c.do(kmsg.NewPtrSASLAuthenticateRequest()).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("SaslAuthenticate: %d", r.ErrorCode)
	}
	if md := c.do(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse); len(md.Topics) != 2 {
		t.Errorf("no authorizer: %d topics, want both", len(md.Topics))
	}
}

// Mutual TLS: the certificate's subject maps to the principal through the
// rules; alice reads only t; a client without a certificate, or one the
// CA did not sign, fails the handshake; a subject no rule maps fails
// authentication.
func TestMutualTLS(t *testing.T) {
	ca, other := testcert.NewCA(t, "test CA"), testcert.NewCA(t, "another CA")
	mapper, err := authz.ParseMappingRules(`RULE:^CN=([a-z]+),OU=readers$/$1/L`)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	cat := secCatalog(t)
	_, addr := testServer(t, cat, func(c *Config) {
		c.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool, MinVersion: tls.VersionTLS12}
		c.CertPrincipal, c.Authorizer, c.Observer, c.Logger = mapper.Principal, testRules(t), rec, quiet
	})
	client := func(cert *tls.Certificate) kgo.Opt {
		cfg := &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		return kgo.DialTLSConfig(cfg)
	}
	alice := ca.Client(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"readers"}}).TLS
	if n, err := readAll(t, addr, "t", 6, client(&alice)); err != nil || n != 6 {
		t.Fatalf("alice: %d records, %v", n, err)
	}
	checkDenied(t, addr, cat, client(&alice))
	if got := rec.get(func(r *recorder) int { return r.auth["TLS ok"] }); got == 0 {
		t.Errorf("no TLS authentication counted: %v", rec.auth)
	}
	unmapped := ca.Client(t, pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"writers"}}).TLS
	stranger := other.Client(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"readers"}}).TLS
	for name, cert := range map[string]*tls.Certificate{"no certificate": nil, "another CA": &stranger, "no rule maps it": &unmapped} {
		if _, err := request(t, addr, kmsg.NewPtrMetadataRequest(), client(cert)); err == nil {
			t.Errorf("%s: Metadata answered", name)
		}
	}
	// The server counts a failed handshake when its own side of it
	// returns, which under TLS 1.3 can be after the client has seen the
	// alert and moved on: wait for the counts rather than read them once.
	waitFor(t, func() bool {
		return rec.get(func(r *recorder) int { return r.bad[BadTLS] }) >= 2 &&
			rec.get(func(r *recorder) int { return r.auth["TLS failed"] }) > 0
	})
	// A client that connects and never starts the handshake is closed at
	// the idle timeout, not held.
}

// The connection limits close a connection above them at accept, count
// it, and free the slot when a connection ends.
func TestConnectionLimits(t *testing.T) {
	rec := newRecorder()
	s, addr := testServer(t, secCatalog(t), func(c *Config) {
		c.MaxConnectionsPerIP, c.MaxConnections, c.Observer, c.Logger = 2, 3, rec, quiet
	})
	a, b := dial(t, addr), dial(t, addr)
	a.do(kmsg.NewPtrApiVersionsRequest())
	b.do(kmsg.NewPtrApiVersionsRequest())
	c := dial(t, addr)
	c.closed()
	if got := rec.get(func(r *recorder) int { return r.rejected[RejectMaxConnectionsPerIP] }); got != 1 {
		t.Errorf("%d refused per IP, want 1", got)
	}
	a.c.Close()
	waitFor(t, func() bool { return s.OpenConnections() == 1 })
	d := dial(t, addr)
	if r := d.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	if got := rec.get(func(r *recorder) int { return r.open }); got != 2 {
		t.Errorf("%d open, want 2", got)
	}
}

// The total limit, from two loopback addresses.
func TestMaxConnections(t *testing.T) {
	rec := newRecorder()
	_, addr := testServer(t, secCatalog(t), func(c *Config) { c.MaxConnections, c.Observer, c.Logger = 1, rec, quiet })
	a := dial(t, addr)
	a.do(kmsg.NewPtrApiVersionsRequest())
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a second connection was served")
	}
	if got := rec.get(func(r *recorder) int { return r.rejected[RejectMaxConnections] }); got != 1 {
		t.Errorf("%d refused, want 1", got)
	}
}

// A connection that sends nothing, one that stops mid-request and one
// that never starts its TLS handshake are closed at the idle timeout and
// counted, each by its reason.
func TestSlowClients(t *testing.T) {
	ca := testcert.NewCA(t, "test CA")
	for _, tc := range []struct {
		name, reason string
		tls          bool
		send         []byte
	}{
		{"idle", BadIdle, false, nil},
		{"half a request", BadTimeout, false, []byte{0, 0, 0, 20, 0, 18}},
		{"no TLS handshake", BadTLS, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			_, addr := testServer(t, secCatalog(t), func(c *Config) {
				c.IdleTimeout, c.Observer, c.Logger = 300*time.Millisecond, rec, quiet
				if tc.tls {
					c.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS}}
				}
			})
			c := dial(t, addr)
			if tc.send != nil {
				c.write(tc.send)
			}
			c.closed()
			waitFor(t, func() bool { return rec.get(func(r *recorder) int { return r.bad[tc.reason] }) == 1 })
		})
	}
}
