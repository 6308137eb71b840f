package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/probe"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kfollower probe: usage errors exit 2 with the reason; against kfake,
// whose Fetch ignores LastFetchedEpoch, the table names the failed check
// and the exit status is 1, and --json carries the same report.
func TestProbeCommand(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.MoveTopicPartition("t", 0, (c.LeaderFor("t", 0)+1)%2); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	bootstrap := strings.Join(c.ListenAddrs(), ",")

	for _, tc := range []struct {
		args []string
		code int
		out  string // in stdout, or in stderr when the code is 2
	}{
		{[]string{"probe", "--bootstrap-servers", "h:1"}, probe.ExitError, "--topic is required"},
		{[]string{"probe", "--bootstrap-servers", "h:1", "--scenario", "chaos"}, probe.ExitError, "the only scenario is failover"},
		{[]string{"probe", "--bootstrap-servers", "h:1", "--scenario", "failover"}, probe.ExitError, "needs --scratch-topic"},
		{[]string{"probe", "--bootstrap-servers", "h:1", "--scenario", "failover", "--scratch-topic", "s", "--topic", "t"}, probe.ExitError, "drop --topic"},
		{[]string{"probe", "--bootstrap-servers", "h:1", "--topic", "t", "--scratch-topic", "s"}, probe.ExitError, "is for --scenario failover"},
		{[]string{"probe", "--help"}, 0, ""},
		{[]string{"probe", "--bootstrap-servers", bootstrap, "--topic", "t"}, probe.ExitFail, "FAIL  diverging_epoch"},
	} {
		var stdout, stderr bytes.Buffer
		code := dispatch(context.Background(), tc.args, &stdout, &stderr, nil)
		where := stdout.String()
		if tc.code == probe.ExitError {
			where = stderr.String()
		}
		if code != tc.code || !strings.Contains(where, tc.out) {
			t.Errorf("kfollower %q: exit %d, want %d with %q in\nstdout: %s\nstderr: %s", tc.args, code, tc.code, tc.out, stdout.String(), stderr.String())
		}
	}

	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"probe", "--bootstrap-servers", bootstrap, "--topic", "t", "--json"}, &stdout, &stderr, nil); code != probe.ExitFail {
		t.Fatalf("--json: exit %d, want %d; stderr: %s", code, probe.ExitFail, stderr.String())
	}
	var rep probe.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout.String())
	}
	if len(rep.Partitions) != 1 || len(rep.Partitions[0].Checks) != 5 || rep.Partitions[0].Checks[3].Status != probe.Fail {
		t.Fatalf("--json report %+v", rep)
	}
}
