package wire

import (
	"encoding/hex"
	"strconv"
)

// OriginID is an origin's 16-byte identity, generated when a data directory is created.
type OriginID [16]byte

// Hash is a SHA-256 chain hash: the hash of an origin's transaction encoding.
type Hash [32]byte

// IsZero reports whether o is the all-zero id, which no origin has.
func (o OriginID) IsZero() bool { return o == OriginID{} }

func (o OriginID) String() string { return hex.EncodeToString(o[:]) }

func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// MarshalCBOR encodes the id as a 16-byte CBOR byte string.
func (o OriginID) MarshalCBOR() ([]byte, error) { return encMode.Marshal(o[:]) }

// UnmarshalCBOR accepts exactly a 16-byte CBOR byte string.
func (o *OriginID) UnmarshalCBOR(b []byte) error { return fixedBytes(b, o[:], "origin id") }

// MarshalCBOR encodes the hash as a 32-byte CBOR byte string.
func (h Hash) MarshalCBOR() ([]byte, error) { return encMode.Marshal(h[:]) }

// UnmarshalCBOR accepts exactly a 32-byte CBOR byte string.
func (h *Hash) UnmarshalCBOR(b []byte) error { return fixedBytes(b, h[:], "hash") }

// MaxNameLen bounds node names and table names.
const MaxNameLen = 64

// ValidName reports whether s is a valid node or table name: 1 to 64 bytes of
// [A-Za-z0-9_.-].
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

func validNameBytes(s []byte) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for _, c := range s {
		if !nameByte(c) {
			return false
		}
	}
	return true
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

func checkName(what, s string) error {
	if !ValidName(s) {
		return badField(what + " " + strconv.Quote(s) + " is not 1-64 bytes of [A-Za-z0-9_.-]")
	}
	return nil
}
