package compose

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dashboardPath is the Grafana dashboard docker-compose.yml provisions.
var dashboardPath = filepath.Join("..", "..", "deploy", "grafana", "dashboards", "kfollower.json")

type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("parsing %s: %v", dashboardPath, err)
	}
	return d
}

// metricRE finds kfollower's metric names in a PromQL expression.
var metricRE = regexp.MustCompile(`\bkfollower_[a-z_]+\b`)

// TestDashboardShape checks what Grafana needs to load the dashboard and what
// the compose test relies on: every panel queries the "datasource" variable's
// Prometheus with at least one expression over kfollower's metrics, ids are
// unique and panels fit the 24-column grid. That the queries return series
// is checked against the compose Prometheus (compose_test.go).
func TestDashboardShape(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: both must be set", d.UID, d.Title)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["topic"] != "query" {
		t.Errorf("template variables %v: want datasource (datasource) and topic (query)", vars)
	}
	want := datasource{Type: "prometheus", UID: "${datasource}"}
	ids := map[int]string{}
	for _, p := range d.Panels {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panel id %d used by %q and %q", p.ID, prev, p.Title)
		}
		ids[p.ID] = p.Title
		if p.Datasource == nil || *p.Datasource != want {
			t.Errorf("panel %q: datasource %+v, want %+v", p.Title, p.Datasource, want)
		}
		if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			if refs[q.RefID] || q.RefID == "" {
				t.Errorf("panel %q: refId %q empty or repeated", p.Title, q.RefID)
			}
			refs[q.RefID] = true
			if q.Datasource == nil || *q.Datasource != want {
				t.Errorf("panel %q %s: datasource %+v, want %+v", p.Title, q.RefID, q.Datasource, want)
			}
			if !metricRE.MatchString(q.Expr) {
				t.Errorf("panel %q %s: %q queries no kfollower metric", p.Title, q.RefID, q.Expr)
			}
			if strings.Count(q.Expr, "(") != strings.Count(q.Expr, ")") {
				t.Errorf("panel %q %s: unbalanced parentheses in %q", p.Title, q.RefID, q.Expr)
			}
		}
	}
	// The panels the dashboard promises (README, docker compose).
	for _, title := range []string{"Lag per partition (records)", "Loss events and records lost",
		"Committed records lost", "Reconciliation round trips", "Leader changes", "Fetch throughput",
		"Fsync latency", "Conformance violations"} {
		found := false
		for _, p := range d.Panels {
			found = found || p.Title == title
		}
		if !found {
			t.Errorf("no panel %q", title)
		}
	}
}
