package bad

// ResultMsg has a field whose type the compact layout has no encoding for.
type ResultMsg struct {
	Op    uint8   `cbor:"1,keyasint"`
	Ratio float64 `cbor:"2,keyasint"`
}

type EventMsg struct{}

type StatusMsg struct{}
