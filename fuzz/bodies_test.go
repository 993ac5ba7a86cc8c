package fuzz

import "testing"

// The fuzz targets' bodies as benchmarks: `go test -fuzz` takes no -cpuprofile, so these
// run each body over the inputs the fuzzer starts from (the seeds and the committed corpus,
// read by corpusInputs)
// to profile where an input's time goes:
//
//	go test ./fuzz -run='^$' -bench='^BenchmarkFuzzDecodeBody$' -cpuprofile=/tmp/decode.prof
//	go tool pprof -top /tmp/decode.prof
//
// One op is one pass over every input; ns/input is the mean cost of one.

// benchInputs runs body over every input per op and reports the mean per input.
func benchInputs(b *testing.B, inputs [][]byte, body func([]byte)) {
	for b.Loop() {
		for _, in := range inputs {
			body(in)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(inputs)), "ns/input")
}

func BenchmarkFuzzDecodeBody(b *testing.B) {
	var inputs [][]byte
	for _, s := range seeds(b) {
		inputs = append(inputs, s.data)
	}
	inputs = append(inputs, corpusInputs(b, "FuzzDecode")...)
	b.Run("all", func(b *testing.B) {
		benchInputs(b, inputs, func(d []byte) { checkWire(b, d); checkSession(b, d) })
	})
	b.Run("wire", func(b *testing.B) { benchInputs(b, inputs, func(d []byte) { checkWire(b, d) }) })
	b.Run("session", func(b *testing.B) { benchInputs(b, inputs, func(d []byte) { checkSession(b, d) }) })
}

func BenchmarkFuzzSessionBody(b *testing.B) {
	var inputs [][]byte
	for _, s := range sessionSeeds(b) {
		if !s.testOnly {
			inputs = append(inputs, s.data)
		}
	}
	inputs = append(inputs, corpusInputs(b, "FuzzSession")...)
	benchInputs(b, inputs, func(d []byte) {
		if _, err := runSessionInput(d); err != nil {
			b.Fatal(err)
		}
	})
}
