package abi

// MarshalForTest is the CBOR encoding records use, for tests comparing the encodings.
func MarshalForTest(v any) []byte {
	p, err := encMode.Marshal(v)
	if err != nil {
		panic(err)
	}
	return p
}
