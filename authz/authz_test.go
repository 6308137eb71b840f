package authz

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"
)

func TestMappingRules(t *testing.T) {
	m, err := ParseMappingRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=([^,]*)\,O=(.*)$/$1@$2/, DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=Alice,OU=ServiceUsers,O=Example": "alice",
		"CN=bob,O=Example":                   "bob@Example",
		"OU=x,CN=carol":                      "OU=x,CN=carol",
	} {
		if got, err := m.Name(dn); err != nil || got != want {
			t.Errorf("Name(%q) = %q, %v; want %q", dn, got, err, want)
		}
	}
	strict, err := ParseMappingRules(`RULE:^CN=(.*)$/$1/U`)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := strict.Name("CN=dave"); got != "DAVE" || err != nil {
		t.Errorf("upper: %q %v", got, err)
	}
	if _, err := strict.Name("O=none"); !errors.Is(err, ErrNoMatchingRule) {
		t.Errorf("no rule matches: %v, want ErrNoMatchingRule", err)
	}
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "eve", Organization: []string{"Org"}}}
	if p, err := strict.Principal(cert); err != nil || p != "User:EVE,O=ORG" {
		t.Errorf("CN=eve,O=Org under ^CN=(.*)$/$1/U: %q %v", p, err)
	}
	if p, err := (&Mapper{rules: []mappingRule{{isDefault: true}}}).Principal(cert); err != nil || p != "User:CN=eve,O=Org" {
		t.Errorf("default principal %q %v, want User:CN=eve,O=Org (RFC 2253 order)", p, err)
	}
	for _, bad := range []string{"RULE:x", "RULE:(/$1/", "NOPE", "RULE:a/b/X", "DEFAULT DEFAULT"} {
		if _, err := ParseMappingRules(bad); err == nil {
			t.Errorf("rules %q parsed", bad)
		}
	}
}

func TestAuthorize(t *testing.T) {
	r, err := ParseACLs("acl", []byte(`
# readers
ALLOW User:alice READ TOPIC PREFIXED orders-
DENY  User:alice READ TOPIC LITERAL orders-secret
allow User:* describe topic literal public
ALLOW User:bob ALL TOPIC LITERAL *
DENY User:bob DESCRIBE TOPIC PREFIXED hidden
ALLOW User:carol READ TOPIC LITERAL onlyhere 10.0.0.1
ALLOW User:alice READ GROUP LITERAL g1
ALLOW User:alice DESCRIBE CLUSTER LITERAL kafka-cluster
`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		p, host string
		op      Operation
		rt      ResourceType
		name    string
		want    bool
	}{
		{"User:alice", "1.2.3.4", Read, Topic, "orders-eu", true},
		{"User:alice", "1.2.3.4", Describe, Topic, "orders-eu", true}, // READ implies DESCRIBE
		{"User:alice", "1.2.3.4", Read, Topic, "orders-secret", false},
		{"User:alice", "1.2.3.4", Describe, Topic, "orders-secret", true}, // DENY READ leaves DESCRIBE
		{"User:alice", "1.2.3.4", Read, Topic, "orders", false},
		{"User:alice", "1.2.3.4", Read, Topic, "public", false},
		{"User:alice", "1.2.3.4", Describe, Topic, "public", true},
		{"User:zed", "1.2.3.4", Describe, Topic, "public", true},
		{"User:zed", "1.2.3.4", Describe, Topic, "orders-eu", false}, // nothing matches: deny
		{"User:bob", "1.2.3.4", Read, Topic, "anything", true},
		{"User:bob", "1.2.3.4", Describe, Topic, "hidden-x", false},
		{"User:bob", "1.2.3.4", Read, Topic, "hidden-x", true}, // DENY DESCRIBE leaves READ (Kafka too)
		{"User:carol", "10.0.0.1", Read, Topic, "onlyhere", true},
		{"User:carol", "10.0.0.2", Read, Topic, "onlyhere", false},
		{"User:alice", "1.2.3.4", Read, Group, "g1", true},
		{"User:alice", "1.2.3.4", Read, Topic, "g1", false},
		{"User:alice", "1.2.3.4", Describe, Cluster, ClusterName, true},
		{"User:bob", "1.2.3.4", Describe, Cluster, ClusterName, false},
	}
	for _, c := range cases {
		if got := r.Authorize(c.p, c.host, c.op, c.rt, c.name); got != c.want {
			t.Errorf("%s from %s %s %s %s: %v, want %v", c.p, c.host, c.op, c.rt, c.name, got, c.want)
		}
	}
	var s Store
	if s.Authorize("User:bob", "h", Read, Topic, "x") {
		t.Error("a Store without rules allowed")
	}
}

func TestParseACLErrors(t *testing.T) {
	_, err := ParseACLs("/etc/acl", []byte("ALLOW User:a READ TOPIC LITERAL t\nALLOW User:a WRITE TOPIC LITERAL t\n\nALLOW a READ TOPIC LITERAL t\nDENY User:a READ TOPIC PREFIXED *\nALLOW User:a READ CLUSTER LITERAL x\nALLOW User:a READ TOPIC LITERAL t not-an-ip\nALLOW User:a READ\n"))
	if err == nil {
		t.Fatal("parsed")
	}
	for _, want := range []string{`/etc/acl:2: operation "WRITE"`, "/etc/acl:4: principal", "/etc/acl:5: a PREFIXED name", "/etc/acl:6: a CLUSTER entry", "/etc/acl:7: host", "/etc/acl:8: 3 fields"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "/etc/acl:1:") {
		t.Errorf("valid line 1 reported: %v", err)
	}
}

// An invalid file change leaves the old rules in force and says where it
// is wrong, once; fixing it puts the new rules in force.
func TestFileReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acl")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ALLOW User:a READ TOPIC LITERAL t\n")
	f, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a := f.Store()
	if !a.Authorize("User:a", "h", Read, Topic, "t") {
		t.Fatal("not in force")
	}
	if changed, err := f.Reload(); changed || err != nil {
		t.Fatalf("unchanged file: %v %v", changed, err)
	}
	write("ALLOW User:a READ TOPIC LITERAL u\nALLOW User:a REED TOPIC LITERAL t\n")
	changed, err := f.Reload()
	if changed || err == nil || !strings.Contains(err.Error(), path+":2:") {
		t.Fatalf("bad file: changed %v, err %v; want the error at %s:2", changed, err, path)
	}
	if !a.Authorize("User:a", "h", Read, Topic, "t") || a.Authorize("User:a", "h", Read, Topic, "u") {
		t.Fatal("a bad file changed the rules")
	}
	if changed, err := f.Reload(); changed || err != nil || f.Err() == nil {
		t.Fatalf("the same bad file again: %v %v (Err %v); want it reported once and kept in Err", changed, err, f.Err())
	}
	write("ALLOW User:a READ TOPIC LITERAL u\n")
	if changed, err := f.Reload(); !changed || err != nil || f.Err() != nil {
		t.Fatalf("fixed file: %v %v %v", changed, err, f.Err())
	}
	if a.Authorize("User:a", "h", Read, Topic, "t") || !a.Authorize("User:a", "h", Read, Topic, "u") {
		t.Fatal("the fixed file is not in force")
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Fatal("a missing file loaded")
	}
}

// run drives a franz-go client mechanism (an implementation of its own)
// against an exchange.
func run(t *testing.T, c *Credentials, m sasl.Mechanism) (string, error) {
	t.Helper()
	x, ok := c.Start(m.Name())
	if !ok {
		t.Fatalf("%s not offered", m.Name())
	}
	sess, msg, err := m.Authenticate(context.Background(), "kf:9092")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		ans, done, err := x.Step(msg)
		if err != nil {
			return "", err
		}
		cdone, next, cerr := sess.Challenge(ans)
		if cerr != nil {
			t.Fatalf("client rejects the server's answer: %v", cerr)
		}
		if done {
			if !cdone {
				t.Fatal("server done, client not")
			}
			return x.User(), nil
		}
		msg = next
	}
	t.Fatal("no end")
	return "", nil
}

func TestCredentials(t *testing.T) {
	// A salted SCRAM-SHA-256 credential for carol, as Kafka stores it.
	cl, _ := xscram.SHA256.NewClient("carol", "c-pass", "")
	sc, err := cl.GetStoredCredentialsWithError(xscram.KeyFactors{Salt: "0123456789abcdef", Iters: 8192})
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(b []byte) string { return base64Std(b) }
	file := "# users\nalice password=a secret with spaces\n\tbob password=b\ncarol SCRAM-SHA-256=[salt=" + b64([]byte(sc.Salt)) +
		",stored_key=" + b64(sc.StoredKey) + ",server_key=" + b64(sc.ServerKey) + ",iterations=8192]\n"
	c, err := ParseCredentials("creds", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if c.Users() != 3 || strings.Contains(c.String(), "secret") {
		t.Fatalf("%v", c)
	}
	ok := []struct {
		user string
		m    sasl.Mechanism
	}{
		{"alice", scram.Auth{User: "alice", Pass: "a secret with spaces"}.AsSha256Mechanism()},
		{"alice", scram.Auth{User: "alice", Pass: "a secret with spaces"}.AsSha512Mechanism()},
		{"bob", plain.Auth{User: "bob", Pass: "b"}.AsMechanism()},
		{"carol", scram.Auth{User: "carol", Pass: "c-pass"}.AsSha256Mechanism()},
		{"carol", plain.Auth{User: "carol", Pass: "c-pass"}.AsMechanism()},
	}
	for _, k := range ok {
		if u, err := run(t, c, k.m); err != nil || u != k.user {
			t.Errorf("%s %s: %q %v", k.user, k.m.Name(), u, err)
		}
	}
	bad := []sasl.Mechanism{
		scram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism(),
		scram.Auth{User: "nobody", Pass: "x"}.AsSha512Mechanism(),
		scram.Auth{User: "carol", Pass: "c-pass"}.AsSha512Mechanism(), // no SHA-512 credential
		plain.Auth{User: "bob", Pass: "B"}.AsMechanism(),
		plain.Auth{User: "nobody", Pass: "b"}.AsMechanism(),
		plain.Auth{Zid: "alice", User: "bob", Pass: "b"}.AsMechanism(),
	}
	for _, m := range bad {
		_, err := run(t, c, m)
		var ae *AuthError
		if !errors.As(err, &ae) || strings.Contains(ae.Msg, "wrong") {
			t.Errorf("%s: %v, want an AuthError naming no secret", m.Name(), err)
		}
	}
	if _, ok := c.Start("GSSAPI"); ok {
		t.Error("GSSAPI offered")
	}
	for _, f := range []string{"alice\n", "alice password=\n", "alice pass=x\n", "a password=x\na password=y\n", "c SCRAM-SHA-256=[salt=AA==]\n", "c SCRAM-SHA-256=[salt=AA==,stored_key=AA==,server_key=AA==,iterations=10]\n", ""} {
		_, err := ParseCredentials("creds", []byte(f))
		if err == nil {
			t.Errorf("%q parsed", f)
		} else if strings.Contains(err.Error(), "password=x") || strings.Contains(err.Error(), "=y") {
			t.Errorf("%q: the error shows the secret: %v", f, err)
		}
	}
}

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
