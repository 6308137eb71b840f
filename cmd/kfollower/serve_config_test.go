package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Bad --serve values are refused with exit 1 before the cluster is
// contacted or anything is written; the YAML key and the environment
// variable set the same settings as the flags.
func TestServeBadInput(t *testing.T) {
	bin := binary(t)
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unparsable", nil, []string{"--serve", "localhost"}, `--serve "localhost": want host:port`},
		{"bad port", nil, []string{"--serve", "127.0.0.1:http-ish"}, `--serve "127.0.0.1:http-ish": bad port`},
		{"wildcard without advertise", nil, []string{"--serve", ":9092"}, "--serve :9092 listens on every interface: give --serve-advertise"},
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
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
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
