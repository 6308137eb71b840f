package probe

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Exit codes, the same as the audit tools': cmd/kfollower passes them to
// os.Exit.
const (
	// ExitOK: every applicable check passed.
	ExitOK = 0
	// ExitFail: a check failed.
	ExitFail = 1
	// ExitError: usage or connection errors, or a partition that could not
	// be probed.
	ExitError = 2
)

// Status is the outcome of a check, or of one observation in it.
type Status string

const (
	Pass Status = "pass"
	Fail Status = "fail"
	// NotApplicable: the partition's state gives nothing to ask (an epoch
	// 0 has no stale epoch to fence with), or the broker's API versions
	// lack the field the check needs.
	NotApplicable Status = "n/a"
)

func passIf(ok bool) Status {
	if ok {
		return Pass
	}
	return Fail
}

// Observation is one piece of evidence: a request, its answer and what the
// rule says the answer must be.
type Observation struct {
	Request  string `json:"request"`
	Answer   string `json:"answer"`
	Expected string `json:"expected"`
	Status   Status `json:"status"`
}

// CheckResult is one check on one partition.
type CheckResult struct {
	// Check is the check's stable name (the Check* constants).
	Check string `json:"check"`
	// Rule names the rule, its place in Kafka's source and in docs/kafka.md.
	Rule   string `json:"rule"`
	Status Status `json:"status"`
	// Reason says why the check is not applicable, or sums up a failure.
	Reason   string        `json:"reason,omitempty"`
	Evidence []Observation `json:"evidence"`
}

// add appends an observation.
func (c *CheckResult) add(o Observation) { c.Evidence = append(c.Evidence, o) }

// finish sets the status from the evidence: fail if any observation
// failed, pass if any passed, otherwise not applicable (with reason, if
// none is set yet).
func (c *CheckResult) finish(reason string) CheckResult {
	c.Status = NotApplicable
	for _, o := range c.Evidence {
		switch o.Status {
		case Fail:
			c.Status = Fail
		case Pass:
			if c.Status != Fail {
				c.Status = Pass
			}
		}
	}
	if c.Status == NotApplicable && c.Reason == "" {
		c.Reason = reason
	}
	return *c
}

// PartitionReport is the probe of one partition. In a failover scenario
// there is one per step, named by Step.
type PartitionReport struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Step      string `json:"step,omitempty"`
	Leader    int32  `json:"leader"`
	// LeaderEpoch is the epoch Metadata named; every request was fenced
	// with it (KIP-320).
	LeaderEpoch int32 `json:"leaderEpoch"`
	// LogStart, HighWatermark and LogEnd are the leader's, as ListOffsets
	// and Fetch reported them; -1 when unknown.
	LogStart      int64   `json:"logStart"`
	HighWatermark int64   `json:"highWatermark"`
	LogEnd        int64   `json:"logEnd"`
	Lineage       []Epoch `json:"lineage"`
	// Attempts is how many times the partition was probed: a leader
	// change during a probe discards it and starts again.
	Attempts int           `json:"attempts"`
	Checks   []CheckResult `json:"checks"`
	// Error says why the partition could not be probed (no leader, a
	// connection failure, leadership that kept moving).
	Error string `json:"error,omitempty"`
}

// Status is the partition's worst check outcome: fail, then pass; n/a when
// nothing applied.
func (p PartitionReport) Status() Status {
	s := NotApplicable
	for _, c := range p.Checks {
		switch c.Status {
		case Fail:
			return Fail
		case Pass:
			s = Pass
		}
	}
	return s
}

// Report is the result of Run or Failover. Its exported fields are its JSON
// form.
type Report struct {
	Scenario   string            `json:"scenario,omitempty"`
	Partitions []PartitionReport `json:"partitions"`
}

// ExitCode is ExitFail if any check failed, else ExitError if a partition
// could not be probed, else ExitOK.
func (r *Report) ExitCode() int {
	code := ExitOK
	for _, p := range r.Partitions {
		if p.Status() == Fail {
			return ExitFail
		}
		if p.Error != "" {
			code = ExitError
		}
	}
	return code
}

// WriteTable renders one block per partition: a line on the partition,
// then a line per check with its status and rule, and under a failed or
// inapplicable check the reason and every failed observation (request,
// answer, expected). The JSON form has all the evidence.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var pass, fail, na, errs int
	for i, p := range r.Partitions {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		name := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
		if p.Step != "" {
			name += " (" + p.Step + ")"
		}
		// No tab in the partition's line, so that it does not widen the
		// check columns.
		if p.Error != "" {
			errs++
			fmt.Fprintf(tw, "%s: ERROR: %s\n", name, p.Error)
		} else {
			lin := lineage{entries: p.Lineage}
			fmt.Fprintf(tw, "%s: leader %d, epoch %d; log start %d, high watermark %d, log end %d; lineage %s\n",
				name, p.Leader, p.LeaderEpoch, p.LogStart, p.HighWatermark, p.LogEnd, orDash(lin.String()))
		}
		for _, c := range p.Checks {
			switch c.Status {
			case Pass:
				pass++
			case Fail:
				fail++
			default:
				na++
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", strings.ToUpper(string(c.Status)), c.Check, c.Rule)
			if c.Status != Pass && c.Reason != "" {
				fmt.Fprintf(tw, "      %s\n", c.Reason)
			}
			for _, o := range c.Evidence {
				if o.Status == Fail {
					fmt.Fprintf(tw, "      %s\n        answered: %s\n        expected: %s\n", o.Request, o.Answer, o.Expected)
				}
			}
		}
	}
	what := "partition"
	if r.Scenario != "" {
		what = "step"
	}
	fmt.Fprintf(tw, "\n%s probed, %s not: %d checks passed, %d failed, %d not applicable\n",
		count(len(r.Partitions)-errs, what), count(errs, what), pass, fail, na)
	return tw.Flush()
}

// count is "1 partition", "2 partitions".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
