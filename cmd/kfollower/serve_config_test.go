package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kfollower/kfollower/authz"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Bad --serve values are refused with exit 1 before the cluster is
// contacted or anything is written; the YAML key and the environment
// variable set the same settings as the flags.
func TestServeBadInput(t *testing.T) {
	bin := binary(t)
	sec := securityFiles(t)
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unparsable", nil, []string{"--serve", "localhost"}, `--serve "localhost": want host:port`},
		{"bad port", nil, []string{"--serve", "127.0.0.1:http-ish"}, `--serve "127.0.0.1:http-ish": bad port`},
		{"wildcard without advertise", nil, []string{"--serve", "0.0.0.0:9092"}, "--serve 0.0.0.0:9092 listens on every interface: give --serve-advertise"},
		{"anonymous beyond loopback", nil, []string{"--serve", "0.0.0.0:0", "--serve-advertise", "h:9092"}, "no client authenticates: give --serve-sasl-credentials or --serve-tls-client-ca"},
		{"anonymous beyond loopback, TLS alone", nil, []string{"--serve", "0.0.0.0:0", "--serve-advertise", "h:9092", "--serve-tls-cert", sec.cert, "--serve-tls-key", sec.key}, "no client authenticates"},
		{"cert without key", nil, []string{"--serve", "127.0.0.1:0", "--serve-tls-cert", sec.cert}, "--serve-tls-cert and --serve-tls-key go together"},
		{"client CA without cert", nil, []string{"--serve", "127.0.0.1:0", "--serve-tls-client-ca", sec.cert}, "--serve-tls-client-ca needs --serve-tls-cert"},
		{"rules without client CA", nil, []string{"--serve", "127.0.0.1:0", "--serve-principal-mapping-rules", "DEFAULT"}, "--serve-principal-mapping-rules needs --serve-tls-client-ca"},
		{"bad rules", nil, []string{"--serve", "127.0.0.1:0", "--serve-tls-cert", sec.cert, "--serve-tls-key", sec.key, "--serve-tls-client-ca", sec.cert, "--serve-principal-mapping-rules", "RULE:x"}, "--serve-principal-mapping-rules"},
		{"bad key pair", nil, []string{"--serve", "127.0.0.1:0", "--serve-tls-cert", sec.cert, "--serve-tls-key", sec.acl}, "--serve-tls-cert " + sec.cert},
		{"bad ACL file", nil, []string{"--serve", "127.0.0.1:0", "--serve-acl-file", sec.badACL}, sec.badACL + ":2: operation \"WRITE\""},
		{"bad credentials", nil, []string{"--serve", "127.0.0.1:0", "--serve-sasl-credentials", sec.badCreds}, sec.badCreds + ":1: want USER"},
		{"bad mechanism", []string{"KFOLLOWER_SERVE_SASL_MECHANISMS=GSSAPI"}, []string{"--serve", "127.0.0.1:0", "--serve-sasl-credentials", sec.creds}, `--serve-sasl-mechanisms: "GSSAPI"`},
		{"security without serve", nil, []string{"--serve-acl-file", sec.acl}, "need --serve"},
		{"idle timeout", nil, []string{"--serve", "127.0.0.1:0", "--serve-idle-timeout", "0s"}, "--serve-idle-timeout, --serve-acl-reload-interval and --serve-acl-refresh must be positive"},
		{"two ACL sources", nil, []string{"--serve", "127.0.0.1:0", "--serve-acl-file", sec.acl, "--serve-acl-upstream"}, "give one source of ACLs"},
		{"wildcard from env", []string{"KFOLLOWER_SERVE=0.0.0.0:9092"}, nil, "--serve 0.0.0.0:9092 listens on every interface"},
		{"advertise without host", nil, []string{"--serve", "127.0.0.1:0", "--serve-advertise", ":9092"}, `--serve-advertise ":9092": no host`},
		{"advertise port 0", nil, []string{"--serve", "127.0.0.1:0", "--serve-advertise", "h:0"}, `--serve-advertise "h:0": bad port`},
		{"negative node id", nil, []string{"--serve", "127.0.0.1:0", "--serve-node-id", "-1"}, "--serve-node-id -1: want 0 to 2147483647"},
		{"advertise without serve", nil, []string{"--serve-advertise", "h:9092"}, "--serve-advertise and --serve-node-id need --serve"},
		{"groups without serve", nil, []string{"--serve-groups", "upstream"}, "--serve-groups upstream needs --serve"},
		{"groups from env without serve", []string{"KFOLLOWER_SERVE_GROUPS=upstream"}, nil, "--serve-groups upstream needs --serve"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			args := append([]string{"run", "--bootstrap-servers", "127.0.0.1:1", "--topics", "a", "--data-dir", data}, tc.args...)
			r := runBinary(t, bin, tc.env, 30*time.Second, args...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "s3cret") {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and %q", r.code, r.stderr, tc.want)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Fatalf("bad input left the data dir %s behind (%v)", data, err)
			}
		})
	}
}

func TestServeConfigFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kfollower.yaml")
	if err := os.WriteFile(file, []byte("serve: 127.0.0.1:19092\nserve-advertise: kf.example:9092\nserve-node-id: 7\nserve-groups: upstream\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig([]string{"--config", file, "--bootstrap-servers", "x:1", "--topics", "a"}, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Serve != "127.0.0.1:19092" || cfg.ServeAdvertise != "kf.example:9092" || cfg.ServeNodeID != 7 || cfg.ServeGroups != "upstream" {
		t.Fatalf("from the file: serve %q advertise %q node id %d groups %q", cfg.Serve, cfg.ServeAdvertise, cfg.ServeNodeID, cfg.ServeGroups)
	}
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	if def := defaultConfig(); def.Serve != "" {
		t.Fatalf("--serve is on by default: %q", def.Serve)
	}
	// --serve-groups is off unless asked for; the environment sets it,
	// a value other than off and upstream is refused.
	def, err := loadConfig([]string{"--bootstrap-servers", "x:1", "--topics", "a"}, func(string) string { return "" }, nil)
	if err != nil || def.ServeGroups != "off" {
		t.Fatalf("default --serve-groups %q (%v), want off", def.ServeGroups, err)
	}
	env := map[string]string{"KFOLLOWER_SERVE_GROUPS": "upstream"}
	fromEnv, err := loadConfig([]string{"--bootstrap-servers", "x:1", "--topics", "a"}, func(k string) string { return env[k] }, nil)
	if err != nil || fromEnv.ServeGroups != "upstream" {
		t.Fatalf("KFOLLOWER_SERVE_GROUPS=upstream: %q (%v)", fromEnv.ServeGroups, err)
	}
	if _, err := loadConfig([]string{"--bootstrap-servers", "x:1", "--topics", "a", "--serve-groups", "local"}, func(string) string { return "" }, io.Discard); err == nil {
		t.Fatal("--serve-groups local accepted")
	}
}

// The cluster id is made once and read back; a corrupt file is an error
// naming it, and is left as it is.
func TestClusterIDFile(t *testing.T) {
	dir := t.TempDir()
	id, err := loadClusterID(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(id) != 22 {
		t.Fatalf("cluster id %q: want 22 characters", id)
	}
	again, err := loadClusterID(dir)
	if err != nil || again != id {
		t.Fatalf("second load: %q %v, want %q", again, err, id)
	}
	if other, _ := loadClusterID(t.TempDir()); other == id {
		t.Fatalf("two data dirs got the same cluster id %q", id)
	}
	path := filepath.Join(dir, clusterIDName)
	for _, bad := range []string{"", "0\n", "0\nshort\n", "1\n" + id + "\n", "0\n" + id, "0\n" + id + "\nmore"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := loadClusterID(dir)
		if err == nil || !strings.Contains(err.Error(), "cluster id file "+path+" is corrupt") {
			t.Errorf("content %q: %v, want an error naming %s", bad, err, path)
		}
		if b, _ := os.ReadFile(path); string(b) != bad {
			t.Errorf("content %q was rewritten to %q", bad, b)
		}
	}
}

// secFiles are security files for the --serve settings' tests.
type secFiles struct{ cert, key, acl, badACL, creds, badCreds string }

func securityFiles(t *testing.T) secFiles {
	t.Helper()
	dir := t.TempDir()
	pki := newTestPKI(t)
	certPEM, keyPEM := pki.ServerCertPEM, pki.ServerKeyPEM
	f := secFiles{cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem"), acl: filepath.Join(dir, "acl"),
		badACL: filepath.Join(dir, "bad-acl"), creds: filepath.Join(dir, "creds"), badCreds: filepath.Join(dir, "bad-creds")}
	for path, content := range map[string][]byte{
		f.cert: certPEM, f.key: keyPEM,
		f.acl:      []byte("ALLOW User:alice READ TOPIC LITERAL a\n"),
		f.badACL:   []byte("ALLOW User:alice READ TOPIC LITERAL a\nALLOW User:alice WRITE TOPIC LITERAL a\n"),
		f.creds:    []byte("alice password=s3cret\n"),
		f.badCreds: []byte("alice-s3cret\n"),
	} {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// Every security setting has its YAML key; ":PORT" binds loopback and is
// advertised as 127.0.0.1.
func TestServeSecurityConfig(t *testing.T) {
	sec := securityFiles(t)
	file := filepath.Join(t.TempDir(), "kfollower.yaml")
	yaml := "serve: :19092\nserve-tls-cert: " + sec.cert + "\nserve-tls-key: " + sec.key + "\nserve-tls-client-ca: " + sec.cert +
		"\nserve-principal-mapping-rules: RULE:^CN=(.*)$/$1/L,DEFAULT\nserve-sasl-credentials: " + sec.creds +
		"\nserve-sasl-mechanisms: [SCRAM-SHA-256]\nserve-acl-file: " + sec.acl + "\nserve-acl-reload-interval: 3s\nserve-max-connections: 100\n" +
		"serve-max-connections-per-ip: 10\nserve-max-request-bytes: 1MiB\nserve-idle-timeout: 1m\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig([]string{"--config", file, "--bootstrap-servers", "x:1", "--topics", "a"}, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	if cfg.ServeMaxConnections != 100 || cfg.ServeMaxConnectionsPerIP != 10 || cfg.ServeMaxRequestBytes != 1<<20 || cfg.ServeIdleTimeout != time.Minute ||
		cfg.ServeACLReloadInterval != 3*time.Second || cfg.ServeSASLMechanisms.String() != "SCRAM-SHA-256" {
		t.Fatalf("from the file: %+v", cfg.serveSecurity)
	}
	if s := cfg.sec; s.tls == nil || s.mapper == nil || s.sasl == nil || s.acl == nil || s.anonymous || s.listen != "127.0.0.1:19092" {
		t.Fatalf("loaded: %+v", s)
	}
	st := cfg.securityStatus()
	if !st.TLS || !st.MutualTLS || st.Anonymous || st.ACLFile != sec.acl || len(st.SASLMechanisms) != 1 || len(st.Warnings) != 0 {
		t.Fatalf("status %+v", st)
	}
	if def := defaultConfig(); def.ServeAllowAnonymous {
		t.Fatal("anonymous allowed by default")
	}
	anon, err := loadConfig([]string{"--bootstrap-servers", "x:1", "--topics", "a", "--serve", "0.0.0.0:0", "--serve-advertise", "h:1", "--serve-allow-anonymous"}, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := anon.check(); err != nil {
		t.Fatal(err)
	}
	if st := anon.securityStatus(); !st.Anonymous || len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "--serve-allow-anonymous") {
		t.Fatalf("anonymous beyond loopback: status %+v, want the warning", st)
	}
}

// The cluster's ACLs become the entries that decide READ and DESCRIBE:
// WRITE, DELETE and ALTER allowed imply DESCRIBE; anything else decides
// nothing here.
func TestUpstreamEntries(t *testing.T) {
	resp := kmsg.NewPtrDescribeACLsResponse()
	res := func(rt kmsg.ACLResourceType, name string, pat kmsg.ACLResourcePatternType, acls ...kmsg.DescribeACLsResponseResourceACL) {
		r := kmsg.NewDescribeACLsResponseResource()
		r.ResourceType, r.ResourceName, r.ResourcePatternType, r.ACLs = rt, name, pat, acls
		resp.Resources = append(resp.Resources, r)
	}
	acl := func(principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.DescribeACLsResponseResourceACL {
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = principal, "*", op, perm
		return a
	}
	allow, deny := kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny
	res(kmsg.ACLResourceTypeTopic, "orders-", kmsg.ACLResourcePatternTypePrefixed,
		acl("User:alice", kmsg.ACLOperationRead, allow), acl("User:bob", kmsg.ACLOperationWrite, allow),
		acl("User:carol", kmsg.ACLOperationWrite, deny), acl("Group:ops", kmsg.ACLOperationRead, allow),
		acl("User:dave", kmsg.ACLOperationCreate, allow))
	res(kmsg.ACLResourceTypeTopic, "orders-secret", kmsg.ACLResourcePatternTypeLiteral, acl("User:alice", kmsg.ACLOperationAll, deny))
	res(kmsg.ACLResourceTypeTransactionalId, "tx", kmsg.ACLResourcePatternTypeLiteral, acl("User:alice", kmsg.ACLOperationRead, allow))
	res(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypeLiteral, acl("User:alice", kmsg.ACLOperationDescribe, allow))
	r, err := authz.NewRules(upstreamEntries(resp))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    string
		op   authz.Operation
		rt   authz.ResourceType
		name string
		want bool
	}{
		{"User:alice", authz.Read, authz.Topic, "orders-eu", true},
		{"User:alice", authz.Describe, authz.Topic, "orders-secret", false},
		{"User:bob", authz.Describe, authz.Topic, "orders-eu", true},
		{"User:bob", authz.Read, authz.Topic, "orders-eu", false},
		{"User:carol", authz.Describe, authz.Topic, "orders-eu", false},
		{"User:dave", authz.Describe, authz.Topic, "orders-eu", false},
		{"User:alice", authz.Describe, authz.Cluster, authz.ClusterName, true},
	} {
		if got := r.Authorize(c.p, "127.0.0.1", c.op, c.rt, c.name); got != c.want {
			t.Errorf("%s %s %s %s: %v, want %v", c.p, c.op, c.rt, c.name, got, c.want)
		}
	}
	if n := len(r.Entries()); n != 4 {
		t.Errorf("%d entries, want 4: %v", n, r.Entries())
	}
}
