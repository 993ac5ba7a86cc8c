package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"plait/protocol/wire"
)

// TestCountersList: CountersDoc.List names every counter of the document once, with its
// value, and /metrics has a metric for each: a counter added to the document but not to
// the list, or to the list but not to the metrics, fails here.
func TestCountersList(t *testing.T) {
	c := CountersDoc{TxnsApplied: 1, DuplicatesReceived: 2, GapsDetected: 3, ResendsRequested: 4, ProtocolErrors: 5, Divergences: 6,
		PurgedAnswers: 7, EntriesPurged: 8}
	var fromJSON map[string]uint64
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &fromJSON); err != nil {
		t.Fatal(err)
	}
	list := c.List()
	if len(list) != len(fromJSON) {
		t.Fatalf("List has %d counters, the document %d", len(list), len(fromJSON))
	}
	for _, k := range list {
		if v, ok := fromJSON[k.Name]; !ok || v != k.Value {
			t.Errorf("List's %s = %d, the document's = %d (present %v)", k.Name, k.Value, v, ok)
		}
		if descCounters[k.Name] == nil {
			t.Errorf("counter %s has no metric", k.Name)
		}
	}
	if len(descCounters) != len(list) {
		t.Errorf("%d counter metrics for %d counters", len(descCounters), len(list))
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
