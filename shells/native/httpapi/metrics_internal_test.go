package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"plait/internal/docsection"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// TestCountersInContract: the counters of replica.Counters (its tags, from which the
// document, plait status and the metrics derive them) are docs/contract.md §8.4's rows in
// their order, and each has its row plait_NAME_total in §9, labeled by code where its
// metric is; the document encodes each under its name; no name is used twice. A counter
// added to the struct without its rows, or a row without a counter, fails here.
func TestCountersInContract(t *testing.T) {
	var c CountersDoc
	v := reflect.ValueOf(&c.Counters).Elem()
	for i := range v.NumField() {
		v.Field(i).SetUint(uint64(100 + i))
	}
	list := c.List()
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON map[string]uint64
	if err := json.Unmarshal(raw, &fromJSON); err != nil {
		t.Fatal(err)
	}
	if len(list) != v.NumField() || len(fromJSON) != len(list) {
		t.Fatalf("%d fields, %d in List, %d in the document: a name is used twice", v.NumField(), len(list), len(fromJSON))
	}
	var back CountersDoc
	if err := json.Unmarshal(raw, &back); err != nil || back != c {
		t.Errorf("the document's counters decoded: %+v, %v; want %+v", back, err, c)
	}
	for i, k := range list {
		if k.Value != uint64(100+i) || fromJSON[k.Name] != k.Value {
			t.Errorf("counter %s: List %d, the document %d; want %d", k.Name, k.Value, fromJSON[k.Name], 100+i)
		}
	}

	row := regexp.MustCompile("(?m)^\\| `([a-z][a-z0-9_]*)` \\|")
	var documented []string
	for _, m := range row.FindAllStringSubmatch(docsection.Section(t, "docs/contract.md", "8.4"), -1) {
		documented = append(documented, m[1])
	}
	var names []string
	for _, k := range list {
		names = append(names, k.Name)
	}
	if !slices.Equal(names, documented) {
		t.Errorf("the counters, in order: %v; the rows of docs/contract.md §8.4: %v", names, documented)
	}
	metrics := docsection.Section(t, "docs/contract.md", "9")
	for _, f := range counterFields {
		labels := "none"
		if f.byCode {
			labels = "`code`"
		}
		want := fmt.Sprintf("| `plait_%s_total` | counter | %s | `%s`", f.name, labels, f.name)
		if !strings.Contains(metrics, want) {
			t.Errorf("docs/contract.md §9 has no row %q", want)
		}
	}
}

// TestFailClockOffset: a write the replica refused for the node's clock answers 503 with
// the code clock-offset and the replica's message, in the API's error form.
func TestFailClockOffset(t *testing.T) {
	rec := httptest.NewRecorder()
	fail(rec, wire.NewError(wire.CodeClockOffset, "2 of 2 measured peers see this node's clock more than 500ms off"))
	want := `{"error":{"code":"clock-offset","message":"2 of 2 measured peers see this node's clock more than 500ms off"}}` + "\n"
	if rec.Code != http.StatusServiceUnavailable || rec.Body.String() != want {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
}

// TestFailStorage: a write refused for degraded storage answers in the API's error form
// with the storage error's code: 507 for a full file system (it heals once space is back),
// 503 for any other failure of a write or sync; wrapped or not.
func TestFailStorage(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{&store.StorageError{Code: wire.CodeStorageFull, Op: "free-space guard", Err: errors.New("3067904 bytes free, below the reserve of 3145728")},
			http.StatusInsufficientStorage, "storage-full"},
		{fmt.Errorf("node: writing: %w", &store.StorageError{Code: wire.CodeStorageFull, Op: "apply"}),
			http.StatusInsufficientStorage, "storage-full"},
		{&store.StorageError{Code: wire.CodeStorageFailed, Op: "sync", Err: errors.New("IO error: Input/output error")},
			http.StatusServiceUnavailable, "storage-failed"},
	} {
		rec := httptest.NewRecorder()
		fail(rec, c.err)
		var se *store.StorageError
		errors.As(c.err, &se)
		want := `{"error":{"code":"` + c.code + `","message":` + strconv.Quote(se.Error()) + `}}` + "\n"
		if rec.Code != c.status || rec.Body.String() != want {
			t.Errorf("%v: %d %s; want %d %s", c.err, rec.Code, rec.Body.String(), c.status, want)
		}
	}
}

// exportedNames is every metric name /metrics can answer: the node's, the API's own, and
// the Go runtime and process collectors' (as New registers them).
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc, 1000)
	(&metrics{}).Describe(ch)
	(&apiMetrics{}).Describe(ch)
	collectors.NewGoCollector().Describe(ch)
	collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}).Describe(ch)
	close(ch)
	fq := regexp.MustCompile(`fqName: "([a-z_0-9]+)"`)
	names := map[string]bool{}
	for d := range ch {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		names[m[1]] = true
	}
	return names
}

// TestDeployMetricNames: every metric name the alert rules (deploy/prometheus/alerts.yml)
// and the Grafana dashboard (deploy/grafana/plait.json) read is one the node exports, and
// docs/contract.md §9 has a row for every plait_ metric it exports: a metric renamed or
// dropped fails here before an alert goes silent. The dashboard's expressions are read
// from its JSON (every target of every panel, and the templating queries).
func TestDeployMetricNames(t *testing.T) {
	names := exportedNames(t)
	metric := regexp.MustCompile(`\b(?:plait|go|process)_[a-z0-9_]+\b`)
	check := func(file string, texts []string) {
		used := 0
		for _, text := range texts {
			for _, m := range metric.FindAllString(text, -1) {
				used++
				if !names[m] {
					t.Errorf("%s reads %s, which the node does not export", file, m)
				}
			}
		}
		if used == 0 {
			t.Errorf("%s reads no metric: the check found nothing to check", file)
		}
	}
	alerts, err := os.ReadFile("../../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, line := range strings.Split(string(alerts), "\n") {
		if l := strings.TrimSpace(line); !strings.HasPrefix(l, "#") {
			exprs = append(exprs, l)
		}
	}
	check("alerts.yml", exprs)

	raw, err := os.ReadFile("../../../deploy/grafana/plait.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	exprs = nil
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			exprs = append(exprs, q)
		}
	}
	check("plait.json", exprs)

	contract, err := os.ReadFile("../../../docs/contract.md")
	if err != nil {
		t.Fatal(err)
	}
	for n := range names {
		if strings.HasPrefix(n, "plait_") && !strings.Contains(string(contract), "| `"+n+"` |") {
			t.Errorf("docs/contract.md §9 has no row for %s", n)
		}
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `(plait_[a-z0-9_]+)` \\|").FindAllStringSubmatch(docsection.Section(t, "docs/contract.md", "9"), -1) {
		if !names[m[1]] {
			t.Errorf("docs/contract.md §9 has a row for %s, which the node does not export", m[1])
		}
	}
}

// TestDeployAlertsDocumented: every alert of deploy/prometheus/alerts.yml has its row in
// docs/operations.md §14 (what it means, what to do) and at least one promtool test in
// alerts_test.yml, and every row of that table names an alert the rules hold: an alert
// added without its row or test, or one renamed or dropped with its row left behind,
// fails here.
func TestDeployAlertsDocumented(t *testing.T) {
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	names := func(re *regexp.Regexp, text string) map[string]bool {
		m := map[string]bool{}
		for _, s := range re.FindAllStringSubmatch(text, -1) {
			m[s[1]] = true
		}
		return m
	}
	rules := names(regexp.MustCompile(`(?m)^\s*- alert: (\w+)\s*$`), read("../../../deploy/prometheus/alerts.yml"))
	tested := names(regexp.MustCompile(`(?m)^\s*alertname: (\w+)\s*$`), read("../../../deploy/prometheus/alerts_test.yml"))
	rows := names(regexp.MustCompile("(?m)^\\| `(Plait\\w+)` \\|"), docsection.Section(t, "docs/operations.md", "14"))
	if len(rules) == 0 || len(rows) == 0 {
		t.Fatalf("%d alerts in alerts.yml, %d rows in docs/operations.md §14: the check found nothing to check", len(rules), len(rows))
	}
	for a := range rules {
		if !rows[a] {
			t.Errorf("alert %s has no row in docs/operations.md §14", a)
		}
		if !tested[a] {
			t.Errorf("alert %s has no test in alerts_test.yml", a)
		}
	}
	for a := range rows {
		if !rules[a] {
			t.Errorf("docs/operations.md §14 has a row for %s, which alerts.yml does not hold", a)
		}
	}
}

// TestHubMetrics: a leaf's hub and a hub's leaves become their gauges (docs/contract.md
// §9), the last lag band as le_ms +Inf, and the hub's refusals by code the series of the
// counters leaves_refused and leaf_writes_refused; a node that is neither has none of them.
func TestHubMetrics(t *testing.T) {
	gather := func(st replica.Status) (map[string]float64, map[string][]replica.CodeCount) {
		ch := make(chan prometheus.Metric, 100)
		byCode := map[string][]replica.CodeCount{}
		collectHubs(ch, st, byCode)
		close(ch)
		got := map[string]float64{}
		for m := range ch {
			var pb dto.Metric
			if err := m.Write(&pb); err != nil {
				t.Fatal(err)
			}
			name := m.Desc().String()
			name = name[strings.Index(name, `"`)+1:]
			name = name[:strings.Index(name, `"`)]
			for _, l := range pb.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			got[name] = pb.GetGauge().GetValue()
		}
		return got, byCode
	}
	leaf, _ := gather(replica.Status{Hub: &replica.HubStatus{Name: "H", Connected: true, ReoriginatedSeq: 40, CoreSeq: 38}})
	if want := map[string]float64{"plait_hub_connected": 1, "plait_leaf_reoriginated_seq": 40, "plait_leaf_core_seq": 38}; !reflect.DeepEqual(leaf, want) {
		t.Errorf("a leaf's metrics: %v; want %v", leaf, want)
	}
	hub, byCode := gather(replica.Status{Leaves: &replica.LeavesStatus{Max: 500, Connected: 120, Marks: 130, Held: 1,
		Lag:                   []replica.LeafLag{{LeMs: 100, Leaves: 100}, {LeMs: 1000, Leaves: 15}, {LeMs: 10000, Leaves: 4}, {Leaves: 1}},
		LeavesRefusedByCode:   []replica.CodeCount{{Code: "too-many-leaves", Count: 3}},
		WritesRefusedByReason: []replica.CodeCount{{Code: "too-old", Count: 2}}}})
	if want := map[string]float64{"plait_leaves_max": 500, "plait_leaves_connected": 120, "plait_leaf_marks": 130, "plait_leaves_held": 1,
		"plait_leaves_lag{le_ms=100}": 100, "plait_leaves_lag{le_ms=1000}": 15, "plait_leaves_lag{le_ms=10000}": 4, "plait_leaves_lag{le_ms=+Inf}": 1}; !reflect.DeepEqual(hub, want) {
		t.Errorf("a hub's metrics: %v; want %v", hub, want)
	}
	if r, w := byCode["leaves_refused"], byCode["leaf_writes_refused"]; len(r) != 1 || r[0].Count != 3 || len(w) != 1 || w[0].Code != "too-old" {
		t.Errorf("a hub's refusals by code: leaves %v, writes %v", r, w)
	}
	if none, byCode := gather(replica.Status{}); len(none) != 0 || len(byCode) != 0 {
		t.Errorf("a node that is neither leaf nor hub: %v, %v; want no metric of either", none, byCode)
	}
}
