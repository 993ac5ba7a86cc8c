package abi

// MarshalForTest is the CBOR encoding records use, for tests comparing the encodings.
func MarshalForTest(v any) []byte {
	p, err := encMode.Marshal(v)
	if err != nil {
		panic(err)
	}
	return p
}

// HasRow reports whether op is a session command with its row in commands.go.
func HasRow(op Op) bool { return rows[op] != nil }
