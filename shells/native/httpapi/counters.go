package httpapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"plait/protocol/replica"
)

// CountersDoc is the document's counters (docs/contract.md §8.4): the replica's counters,
// each under the name its status tag gives (replica.Counters). It encodes as an object
// with the names in sorted order, as a map would.
type CountersDoc struct{ replica.Counters }

// counterField is one counter of replica.Counters, as its tags declare it.
type counterField struct {
	name   string // in the document, and plait_NAME_total
	help   string // its metric's help
	byCode bool   // its metric has a series per error code
	index  int    // the field's index in replica.Counters
	desc   *prometheus.Desc
}

// counterFields is every counter, in the order replica.Counters declares them: the
// document's, plait status's and the metrics' one list. A field without its tags stops the
// program at start (every test does), rather than leaving a counter out of one of them.
var counterFields = func() []counterField {
	t := reflect.TypeFor[replica.Counters]()
	fields := make([]counterField, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		tag, help := f.Tag.Get("status"), f.Tag.Get("help")
		name, opt, _ := strings.Cut(tag, ",")
		if name == "" || help == "" || f.Type.Kind() != reflect.Uint64 || opt != "" && opt != "by-code" {
			panic(fmt.Sprintf("httpapi: replica.Counters.%s needs a uint64 with tags status:\"name[,by-code]\" and help:\"...\"", f.Name))
		}
		var labels []string
		if opt == "by-code" {
			labels = []string{"code"}
		}
		fields = append(fields, counterField{name: name, help: help, byCode: opt == "by-code", index: i,
			desc: prometheus.NewDesc("plait_"+name+"_total", help, labels, nil)})
	}
	return fields
}()

// Counter is one counter of the document: its name there and its value.
type Counter struct {
	Name  string
	Value uint64
}

// List is every counter, in the order docs/contract.md §8.4 gives them: the one list that
// /metrics and plait status print.
func (c CountersDoc) List() []Counter {
	v := reflect.ValueOf(c.Counters)
	list := make([]Counter, len(counterFields))
	for i, f := range counterFields {
		list[i] = Counter{f.name, v.Field(f.index).Uint()}
	}
	return list
}

// MarshalJSON writes the counters as an object, names sorted (encoding/json sorts a map's
// keys): the bytes the document has always had.
func (c CountersDoc) MarshalJSON() ([]byte, error) {
	m := make(map[string]uint64, len(counterFields))
	for _, k := range c.List() {
		m[k.Name] = k.Value
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads the counters it knows; a counter of a newer node is passed over.
func (c *CountersDoc) UnmarshalJSON(b []byte) error {
	var m map[string]uint64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	v := reflect.ValueOf(&c.Counters).Elem()
	for _, f := range counterFields {
		v.Field(f.index).SetUint(m[f.name])
	}
	return nil
}
