package clustermap_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"plait/protocol/clustermap"
)

// TestParseLeafWindow: leaf_window's rule (contract §22.11) at its limits and one past
// them, with the code and what the message names; Parse and Decode answer alike.
func TestParseLeafWindow(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		code      string // "" when accepted
		mention   string
		want      time.Duration
	}{
		{"a day", withLocks(`"leaf_window":86400`), "", "", 24 * time.Hour},
		{"1 second", withLocks(`"leaf_window":1`), "", "", time.Second},
		{"ten years", withLocks(`"leaf_window":315360000`), "", "", clustermap.MaxLeafWindow},
		{"one second over ten years", withLocks(`"leaf_window":315360001`), "bad-leaf-window", "over the 315360000 seconds allowed", 0},
		{"past 2^64", withLocks(`"leaf_window":99999999999999999999`), "bad-leaf-window", "over the", 0},
		{"0", withLocks(`"leaf_window":0`), "bad-leaf-window", "leaf_window is 0", 0},
		{"negative", withLocks(`"leaf_window":-5`), "bad-leaf-window", "not a whole number", 0},
		{"a fraction", withLocks(`"leaf_window":1.5`), "bad-leaf-window", `"1.5" is not a whole number`, 0},
		{"an exponent", withLocks(`"leaf_window":1e3`), "bad-leaf-window", "not a whole number", 0},
		{"a string", withLocks(`"leaf_window":"24h"`), "bad-leaf-window", "leaf_window is a string", 0},
		{"null", withLocks(`"leaf_window":null`), "bad-leaf-window", "leaf_window is null", 0},
		{"without nodes", `{"generation":1,"leaf_window":60}`, "bad-leaf-window", "needs nodes", 0},
		// The order of the checks: fenced_tables, then leaf_window.
		{"bad fenced tables first", withLocks(`"fenced_tables":7,"leaf_window":0`), "bad-fenced-tables", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := clustermap.Parse([]byte(c.doc))
			if c.code == "" {
				if err != nil {
					t.Fatalf("Parse refused it: %v", err)
				}
				if m.LeafWindow != c.want {
					t.Errorf("LeafWindow %v, want %v", m.LeafWindow, c.want)
				}
				dm, derr := clustermap.Decode(m.Doc)
				if derr != nil || dm.LeafWindow != m.LeafWindow {
					t.Errorf("Decode of the canonical form: %v, window %v; want %v", derr, dm.LeafWindow, m.LeafWindow)
				}
				return
			}
			if err == nil || err.Code != c.code || !strings.Contains(err.Message, c.mention) {
				t.Fatalf("Parse = %v; want %s naming %q", err, c.code, c.mention)
			}
			if cdoc, cerr := clustermap.Canonical([]byte(c.doc)); cerr == nil {
				_, derr := clustermap.Decode(cdoc)
				if e, ok := derr.(*clustermap.Error); !ok || e.Code != c.code {
					t.Errorf("Decode = %v; want %s as Parse", derr, c.code)
				}
			}
		})
	}
}

// TestCheckSuccessorLeafWindow: a map that follows one with a leaf window keeps it or
// raises it; lowering or dropping it is leaf-window-lowered; unfencing is answered first.
func TestCheckSuccessorLeafWindow(t *testing.T) {
	win := func(gen int, fields string) clustermap.Map {
		doc := `{"generation":` + strconv.Itoa(gen) + `,"nodes":[{"name":"A"}]`
		if fields != "" {
			doc += "," + fields
		}
		return mapOf(t, doc+"}")
	}
	for _, c := range []struct {
		name       string
		prev, next clustermap.Map
		code       string // "" when nil
		mention    string
	}{
		{"no window", win(2, ``), win(3, ``), "", ""},
		{"a window added", win(2, ``), win(3, `"leaf_window":60`), "", ""},
		{"kept", win(2, `"leaf_window":60`), win(3, `"leaf_window":60`), "", ""},
		{"raised", win(2, `"leaf_window":60`), win(3, `"leaf_window":61`), "", ""},
		{"lowered", win(2, `"leaf_window":60`), win(3, `"leaf_window":59`), "leaf-window-lowered", "generation 2 has a leaf_window of 60 s and generation 3 has 59 s"},
		{"dropped", win(2, `"leaf_window":60`), win(3, ``), "leaf-window-lowered", "generation 3 has none"},
		{"lowered, the same generation", win(2, `"leaf_window":60`), win(2, `"leaf_window":1`), "", ""},
		{"lowered, a lower generation", win(2, `"leaf_window":60`), win(1, ``), "", ""},
		{"unfenced and lowered", win(2, `"fenced_tables":["t"],"leaf_window":60`), win(3, ``), "unfenced", `the table "t"`},
	} {
		err := clustermap.CheckSuccessor(c.prev, c.next)
		switch {
		case c.code == "" && err != nil:
			t.Errorf("%s: CheckSuccessor = %v, want nil", c.name, err)
		case c.code != "" && (err == nil || err.Code != c.code || !strings.Contains(err.Message, c.mention)):
			t.Errorf("%s: CheckSuccessor = %v, want %s naming %q", c.name, err, c.code, c.mention)
		}
	}
}
