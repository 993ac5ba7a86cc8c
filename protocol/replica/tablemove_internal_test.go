package replica

import (
	"bytes"
	"testing"
)

// TestCopyPointBefore: a fill's copy resume point is below every record of its table and
// of every later table, and above every table before it, bar the one it names (a prefix of
// the table's name), whose records of keys above 0xFF the fill passes over.
func TestCopyPointBefore(t *testing.T) {
	names := []string{"-", "--", "-.", ".", "0", "a", "a-", "a--", "a.", "a0", "ab", "s", "sz", "szzz", "t", "t-", "t0", "z", "zz",
		string(bytes.Repeat([]byte("z"), maxTableName))}
	for _, tn := range names {
		p, key := copyPointBefore([]byte(tn))
		if p == nil {
			if tn != "-" {
				t.Errorf("copyPointBefore(%q) is the start; only the lowest name may be", tn)
			}
			continue
		}
		if len(p) > maxTableName || !ValidTable(p) || len(key) == 0 {
			t.Errorf("copyPointBefore(%q) = %q, %x: not a valid resume point", tn, p, key)
		}
		for _, x := range names {
			c := bytes.Compare([]byte(x), p)
			switch {
			case x < tn && c > 0:
				t.Errorf("copyPointBefore(%q) = %q: table %q, before it, comes after the point", tn, p, x)
			case x >= tn && c <= 0:
				t.Errorf("copyPointBefore(%q) = %q: table %q, not before it, is at or before the point", tn, p, x)
			}
		}
	}
}
