package clustermap

import "testing"

// TestHighest: the rendezvous choice takes the highest value, and of equal values the
// lower name, whatever order the homes are listed in.
func TestHighest(t *testing.T) {
	for _, c := range []struct {
		name   string
		homes  []string
		values map[string]uint64
		want   string
	}{
		{"none", nil, nil, ""},
		{"the highest", []string{"A", "B", "C"}, map[string]uint64{"A": 3, "B": 9, "C": 5}, "B"},
		{"a tie of all, sorted", []string{"A", "B", "C"}, map[string]uint64{"A": 7, "B": 7, "C": 7}, "A"},
		{"a tie of all, not sorted", []string{"C", "B", "A"}, map[string]uint64{"A": 7, "B": 7, "C": 7}, "A"},
		{"a tie at the top, the lower name listed last", []string{"C", "A", "B"}, map[string]uint64{"A": 1, "B": 9, "C": 9}, "B"},
		{"a tie below the top", []string{"B", "A", "C"}, map[string]uint64{"A": 2, "B": 2, "C": 3}, "C"},
		{"the highest value possible", []string{"B", "A"}, map[string]uint64{"A": 1<<64 - 1, "B": 1<<64 - 1}, "A"},
		{"zero values", []string{"B", "A"}, map[string]uint64{}, "A"},
	} {
		if got := highest(c.homes, func(h string) uint64 { return c.values[h] }); got != c.want {
			t.Errorf("%s: highest(%v, %v) = %q, want %q", c.name, c.homes, c.values, got, c.want)
		}
	}
}

// TestHomeValue: a home's value is the first 8 bytes of SHA-256(home 0x00 table 0x00 key),
// big-endian (values computed once with another SHA-256, Python's hashlib).
func TestHomeValue(t *testing.T) {
	for _, c := range []struct {
		home, table, key string
		want             uint64
	}{
		{"A", "users", "k0", 0x89d29ba76eb01c59},
		{"B", "users", "k0", 0xa63d00b3997dfbfc},
		{"C", "users", "k0", 0x38a519149a57b709},
		{"A", "users", "\x00", 0xa23ec1724f8dc7cd},
		{"B", "users", "", 0xaa6eef4307f0370c},
	} {
		if got := homeValue(c.home, []byte(c.table), []byte(c.key)); got != c.want {
			t.Errorf("homeValue(%s, %s, %q) = %016x, want %016x", c.home, c.table, c.key, got, c.want)
		}
	}
}
