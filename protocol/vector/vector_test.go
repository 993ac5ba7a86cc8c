package vector_test

import (
	"crypto/sha256"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"plait/protocol/vector"
	"plait/protocol/wire"
)

// params are the fixed-seed parameters CI runs with; a failure prints the seed.
func params() *gopter.TestParameters {
	p := gopter.DefaultTestParametersWithSeed(20261129)
	p.MinSuccessfulTests = 500
	return p
}

// genVector draws vectors over a small set of origins so that they overlap. Hashes are
// derived from (origin, seq, variant): a variant other than 0 models a divergent entry.
func genVector() gopter.Gen {
	entry := gopter.CombineGens(gen.IntRange(1, 6), gen.UInt64Range(0, 20), gen.IntRange(0, 3)).Map(func(v []any) vector.Entry {
		o := wire.OriginID{byte(v[0].(int))}
		seq := v[1].(uint64)
		e := vector.Entry{Origin: o, Seq: seq}
		if seq > 0 {
			e.Hash = sha256.Sum256([]byte{o[0], byte(seq), byte(seq >> 8), byte(v[2].(int) / 3)})
		}
		return e
	})
	return gen.SliceOfN(8, entry).Map(func(es []vector.Entry) vector.Vector { return vector.Of(es...) })
}

func TestVectorAlgebra(t *testing.T) {
	props := gopter.NewProperties(params())
	props.Property("merge is commutative", prop.ForAll(func(a, b vector.Vector) bool {
		return vector.Equal(vector.Merge(a, b), vector.Merge(b, a))
	}, genVector(), genVector()))
	props.Property("merge is associative", prop.ForAll(func(a, b, c vector.Vector) bool {
		return vector.Equal(vector.Merge(vector.Merge(a, b), c), vector.Merge(a, vector.Merge(b, c)))
	}, genVector(), genVector(), genVector()))
	props.Property("merge is idempotent", prop.ForAll(func(a vector.Vector) bool {
		return vector.Equal(vector.Merge(a, a), a)
	}, genVector()))
	props.Property("merge never moves an origin back", prop.ForAll(func(a, b vector.Vector) bool {
		m := vector.Merge(a, b)
		for _, e := range a.Entries() {
			if e.After(m.Get(e.Origin)) {
				return false
			}
		}
		return true
	}, genVector(), genVector()))
	props.Property("delta then apply equals the whole", prop.ForAll(func(old, cur vector.Vector) bool {
		// A receiver that holds old and applies the delta old -> merge(old, cur) holds it.
		whole := vector.Merge(old, cur)
		got := old.Clone()
		got.Apply(vector.Delta(old, whole))
		return vector.Equal(got, whole)
	}, genVector(), genVector()))
	props.Property("a delta holds only entries ahead of the base", prop.ForAll(func(old, cur vector.Vector) bool {
		for _, e := range vector.Delta(old, cur) {
			if old.Has(e.Origin) && !e.After(old.Get(e.Origin)) {
				return false
			}
		}
		return true
	}, genVector(), genVector()))
	props.Property("encode then decode is the identity", prop.ForAll(func(v vector.Vector) bool {
		b, err := vector.Encode(v)
		if err != nil {
			return false
		}
		w, err := vector.Decode(b)
		if err != nil {
			return false
		}
		b2, err := vector.Encode(w)
		return err == nil && vector.Equal(v, w) && string(b) == string(b2)
	}, genVector()))
	props.TestingRun(t)
}

func TestEntryCheck(t *testing.T) {
	o := wire.OriginID{1}
	for _, c := range []struct {
		e  vector.Entry
		ok bool
	}{
		{vector.Entry{Origin: o}, true},
		{vector.Entry{Origin: o, Seq: 1, Hash: wire.Hash{1}}, true},
		{vector.Entry{}, false},
		{vector.Entry{Origin: o, Hash: wire.Hash{1}}, false},
		{vector.Entry{Origin: o, Seq: 3}, false},
	} {
		if err := c.e.Check(); (err == nil) != c.ok {
			t.Errorf("%+v: %v", c.e, err)
		}
	}
}
