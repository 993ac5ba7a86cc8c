package wire

import (
	"bytes"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strconv"

	"github.com/fxamacker/cbor/v2"
)

// CBOR decoding bounds for control bodies. They are part of the frozen protocol: a body
// nested deeper, or with a longer array or map, is rejected (bad-cbor). Byte and text
// strings are bounded by the frame body limit and by each field's own rule.
const (
	CBORMaxNesting  = 8
	CBORMaxArray    = 65536
	CBORMaxMapPairs = 64
)

var (
	encMode cbor.EncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	if encMode, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic("wire: CBOR encoding options: " + err.Error())
	}
	// Simple values other than false, true and null have no use in plait's bodies and no
	// faithful round trip through decoding (undefined decodes like null): reject them.
	var rejects []func(*cbor.SimpleValueRegistry) error
	for v := 0; v < 256; v++ {
		if v == 20 || v == 21 || v == 22 || (v >= 24 && v <= 31) {
			continue // false, true, null; 24..31 are reserved and never well formed
		}
		rejects = append(rejects, cbor.WithRejectedSimpleValue(cbor.SimpleValue(v)))
	}
	simple, err := cbor.NewSimpleValueRegistryFromDefaults(rejects...)
	if err != nil {
		panic("wire: CBOR simple values: " + err.Error())
	}
	decMode, err = cbor.DecOptions{
		SimpleValues:     simple,
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsForbidden,
		MaxNestedLevels:  CBORMaxNesting,
		MaxArrayElements: CBORMaxArray,
		MaxMapPairs:      CBORMaxMapPairs,
		UTF8:             cbor.UTF8RejectInvalid,
		MapKeyByteString: cbor.MapKeyByteStringAllowed,
		DefaultMapType:   reflect.TypeOf(map[any]any(nil)),
	}.DecMode()
	if err != nil {
		panic("wire: CBOR decoding options: " + err.Error())
	}
}

// Marshal encodes v in Core Deterministic Encoding, as control bodies are.
func Marshal(v any) ([]byte, error) { return encMode.Marshal(v) }

// Unmarshal decodes b into v with the strict options of control bodies.
func Unmarshal(b []byte, v any) error { return decMode.Unmarshal(b, v) }

// Extra holds the keys of a control body that this build does not know. They are kept
// verbatim so that a body re-encodes byte for byte and a newer peer's additions survive.
type Extra map[uint64]cbor.RawMessage

// fieldError is a CBOR value that is well formed but not allowed in its field.
type fieldError struct{ msg string }

func (e *fieldError) Error() string { return e.msg }

func badField(msg string) error { return &fieldError{msg} }

// decodeMap decodes a control body into v (a pointer to a struct with keyasint tags), which
// knows keys 1..known. It enforces: the body is one CBOR map with unsigned keys, no
// duplicate keys, no indefinite lengths, no tags, the nesting and size bounds, every
// required key present, and Core Deterministic Encoding (the body re-encodes to itself).
func decodeMap(b []byte, v any, known uint64, required ...uint64) (Extra, error) {
	if len(b) == 0 || b[0]>>5 != 5 {
		return nil, errors.New("body is not a CBOR map")
	}
	var raw map[uint64]cbor.RawMessage
	if err := decMode.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	for _, k := range required {
		if _, ok := raw[k]; !ok {
			return nil, errors.New("required key " + strconv.FormatUint(k, 10) + " is missing")
		}
	}
	if err := decMode.Unmarshal(b, v); err != nil {
		return nil, err
	}
	var extra Extra
	for _, k := range slices.Sorted(maps.Keys(raw)) { // sorted: errors must not depend on map order
		if k >= 1 && k <= known {
			continue
		}
		r := raw[k]
		var x any
		if err := decMode.Unmarshal(r, &x); err != nil {
			return nil, err
		}
		if !allowedValue(x) {
			return nil, errors.New("value of unknown key " + strconv.FormatUint(k, 10) +
				" holds a floating-point number or a map key that is not an integer, text or byte string")
		}
		if re, err := encMode.Marshal(x); err != nil || !bytes.Equal(re, r) {
			return nil, errors.New("value of unknown key " + strconv.FormatUint(k, 10) + " is not in Core Deterministic Encoding")
		}
		if extra == nil {
			extra = Extra{}
		}
		extra[k] = r
	}
	re, err := encodeMap(v, extra)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(re, b) {
		return nil, errors.New("body is not in Core Deterministic Encoding (or carries an empty optional field)")
	}
	return extra, nil
}

// allowedValue enforces, inside the value of an unknown key, what the typed fields get from
// their Go types: no floating-point numbers (their canonical forms are the encoder's to
// choose), and map keys that are integers, text strings or byte strings. It answers yes or
// no, so that the error text cannot depend on the order maps are walked in.
func allowedValue(x any) bool {
	switch v := x.(type) {
	case float32, float64:
		return false
	case []any:
		for _, e := range v {
			if !allowedValue(e) {
				return false
			}
		}
	case map[any]any:
		for k, e := range v {
			switch k.(type) {
			case uint64, int64, string, cbor.ByteString:
			default:
				return false
			}
			if !allowedValue(e) {
				return false
			}
		}
	}
	return true
}

// encodeMap encodes v in Core Deterministic Encoding, merged with extra keys.
func encodeMap(v any, extra Extra) ([]byte, error) {
	b, err := encMode.Marshal(v)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	var m map[uint64]cbor.RawMessage
	if err := decMode.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		if _, dup := m[k]; dup {
			return nil, errors.New("extra key " + strconv.FormatUint(k, 10) + " collides with a known field")
		}
		m[k] = extra[k]
	}
	return encMode.Marshal(m)
}

// bodyError classifies an error from decoding a body of frame f.
func bodyError(f Frame, err error) *Error {
	var fe *fieldError
	if errors.As(err, &fe) {
		return FrameError(CodeBadField, f.Type, f.Offset, fe.msg)
	}
	var te *txnError
	if errors.As(err, &te) {
		return FrameError(te.Code(), f.Type, f.Offset, te.msg)
	}
	var ce *codedError
	if errors.As(err, &ce) {
		return FrameError(ce.code, f.Type, f.Offset, ce.msg)
	}
	return FrameError(CodeBadCBOR, f.Type, f.Offset, err.Error())
}

// fixedBytes decodes a CBOR byte string of exactly n bytes into dst.
func fixedBytes(b []byte, dst []byte, what string) error {
	var s []byte
	if err := decMode.Unmarshal(b, &s); err != nil {
		return err
	}
	if len(s) != len(dst) {
		return badField(what + " must be " + strconv.Itoa(len(dst)) + " bytes, not " + strconv.Itoa(len(s)))
	}
	copy(dst, s)
	return nil
}
