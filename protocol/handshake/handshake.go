package handshake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strconv"

	"plait/protocol/wire"
)

// Range is an inclusive range of protocol versions.
type Range struct{ Min, Max uint64 }

func (r Range) String() string {
	return strconv.FormatUint(r.Min, 10) + ".." + strconv.FormatUint(r.Max, 10)
}

// Implemented returns the range of protocol versions this build speaks. A build
// advertises exactly this range, or the part of it its configuration allows.
func Implemented() Range { return Range{Min: 1, Max: 4} }

// Clamp returns the range a node configured with [min, max] advertises: 0 means "no bound",
// and the result never leaves Implemented. It fails when nothing remains.
func Clamp(min, max uint64) (Range, *wire.Error) {
	r := Implemented()
	if min > r.Min {
		r.Min = min
	}
	if max != 0 && max < r.Max {
		r.Max = max
	}
	if r.Min > r.Max {
		return r, wire.NewError(wire.CodeBadArgument, "configured versions "+strconv.FormatUint(min, 10)+".."+
			strconv.FormatUint(max, 10)+" leave nothing of the implemented "+Implemented().String())
	}
	return r, nil
}

// Negotiate picks the highest version both ranges hold and the capabilities both sides
// offer (both lists sorted, as HELLO requires). It fails with unsupported-version naming
// both ranges.
func Negotiate(local, peer Range, localCaps, peerCaps []string) (uint64, []string, *wire.Error) {
	lo, hi := max(local.Min, peer.Min), min(local.Max, peer.Max)
	if lo > hi {
		return 0, nil, wire.NewError(wire.CodeUnsupportedVersion,
			"no common protocol version: local "+local.String()+", peer "+peer.String())
	}
	var caps []string
	i, j := 0, 0
	for i < len(localCaps) && j < len(peerCaps) {
		switch {
		case localCaps[i] == peerCaps[j]:
			caps = append(caps, localCaps[i])
			i++
			j++
		case localCaps[i] < peerCaps[j]:
			i++
		default:
			j++
		}
	}
	return hi, caps, nil
}

// transcriptLabel separates plait's handshake MACs from any other use of the secret.
const transcriptLabel = "plait-handshake-mac-1"

// CapTLSExporter is the capability that binds the handshake MAC to the TLS channel: both
// sides add the channel's exporter value (ExporterLabel, 32 bytes) to the transcript, so
// a transcript relayed from another connection does not verify. A side over TLS offers it
// and requires it.
const CapTLSExporter = "tls-exporter"

// ExporterLabel and ExporterLength are the TLS exporter (RFC 8446 §7.5) a shell takes the
// channel binding from, with no context.
const (
	ExporterLabel  = "EXPORTER-plait-channel-binding"
	ExporterLength = 32
)

// MaxChannelBinding bounds a channel binding's length.
const MaxChannelBinding = 64

// WithCap returns the sorted capability list caps with c added once.
func WithCap(caps []string, c string) []string {
	i, found := slices.BinarySearch(caps, c)
	if found {
		return caps
	}
	return slices.Insert(caps, i, c)
}

// MAC is the AUTH value the side of role sender sends: HMAC-SHA256 keyed by SHA-256 of the
// cluster secret over the label, the sender's role and both HELLO bodies (dialer's first),
// each prefixed by its length. Hashing the secret first gives every secret its own key:
// HMAC would otherwise treat "s" and "s\x00" as the same key.
func MAC(secret []byte, sender wire.Role, dialerHello, listenerHello []byte) wire.MAC {
	return BoundMAC(secret, sender, dialerHello, listenerHello, nil)
}

// BoundMAC is MAC over a transcript that ends, when binding is not empty (CapTLSExporter
// negotiated), with the channel binding prefixed by its length.
func BoundMAC(secret []byte, sender wire.Role, dialerHello, listenerHello, binding []byte) wire.MAC {
	key := sha256.Sum256(secret)
	m := hmac.New(sha256.New, key[:])
	var hdr [4]byte
	m.Write([]byte(transcriptLabel))
	m.Write([]byte{byte(sender)})
	binary.BigEndian.PutUint32(hdr[:], uint32(len(dialerHello)))
	m.Write(hdr[:])
	m.Write(dialerHello)
	binary.BigEndian.PutUint32(hdr[:], uint32(len(listenerHello)))
	m.Write(hdr[:])
	m.Write(listenerHello)
	if len(binding) > 0 {
		binary.BigEndian.PutUint32(hdr[:], uint32(len(binding)))
		m.Write(hdr[:])
		m.Write(binding)
	}
	var out wire.MAC
	m.Sum(out[:0])
	return out
}

// Verify checks, in constant time, the MAC a peer of role sender sent.
func Verify(secret []byte, sender wire.Role, dialerHello, listenerHello []byte, got wire.MAC) bool {
	return VerifyBound(secret, sender, dialerHello, listenerHello, nil, got)
}

// VerifyBound checks, in constant time, a BoundMAC a peer of role sender sent.
func VerifyBound(secret []byte, sender wire.Role, dialerHello, listenerHello, binding []byte, got wire.MAC) bool {
	want := BoundMAC(secret, sender, dialerHello, listenerHello, binding)
	return hmac.Equal(want[:], got[:])
}
