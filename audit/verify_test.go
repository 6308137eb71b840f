package audit

import (
	"testing"

	"github.com/kfollower/kfollower/wire/batch"
)

func TestCheckTail(t *testing.T) {
	leader := []Epoch{le(0, 0), le(2, 300)}
	h := func(base int64, n int, epoch int32) batch.Header {
		hd, err := batch.Check(batch.Build(batch.Spec{BaseOffset: base, Records: n, Epoch: epoch}))
		if err != nil {
			t.Fatal(err)
		}
		return hd
	}
	if d := checkTail(h(300, 10, 2), leader, 500); d != nil {
		t.Fatalf("consistent tail batch reported: %+v", d)
	}
	if d := checkTail(h(300, 10, 0), leader, 500); d == nil || d.Kind != DivergedEpoch || d.Offset != 300 {
		t.Fatalf("epoch 0 at 300 when the leader has epoch 2 there: %+v", d)
	}
	if d := checkTail(h(290, 20, 0), leader, 500); d == nil || d.Kind != DivergedEpoch {
		t.Fatalf("batch spanning the leader's epoch change: %+v", d)
	}
	if d := checkTail(h(495, 10, 2), leader, 500); d == nil || d.Kind != DivergedMissing || d.Offset != 500 {
		t.Fatalf("batch past the leader's end: %+v", d)
	}
}

func TestExitCodes(t *testing.T) {
	r := &VerifyReport{Partitions: []PartitionVerify{{Status: StatusMatch}, {Status: StatusError}}}
	if r.ExitCode() != ExitError {
		t.Fatal("error not 2")
	}
	r.Partitions = append(r.Partitions, PartitionVerify{Status: StatusDiverged})
	if r.ExitCode() != ExitMismatch {
		t.Fatal("divergence not 1")
	}
	if (&VerifyReport{}).ExitCode() != ExitOK || ExitCodeFor(nil) != ExitOK || ExitCodeFor(&UsageError{"x"}) != ExitError {
		t.Fatal("ok/usage codes")
	}
}
