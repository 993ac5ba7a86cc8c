package protocol_test

import (
	"crypto/sha256"
	"testing"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// The formats that carry fencing tokens (transaction, chunk and range format 2) are version
// 4's: a session below version 4 neither sends them (bad-argument) nor takes them (the
// code a build without tokens gives them), and a version-4 session carries them.

var sessTok = wire.Token{Generation: 1, Incarnation: 2, Counter: 3, Home: prototest.Origin(0x40)}

// tokenedChain is origin o's first entry, untokened, then a format-2 entry of one key.
func tokenedChain(t *testing.T, o wire.OriginID) [][]byte {
	t.Helper()
	first, err := (&wire.Txn{Origin: o, Seq: 1, HLC: 5, Ops: []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("a"), Value: []byte("1")}}}).Encode()
	must(t, err)
	second, err := (&wire.Txn{Origin: o, Seq: 2, HLC: 6, Prev: sha256.Sum256(first), Token: sessTok,
		Ops: []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k"), Value: []byte("2")}}}).Encode()
	must(t, err)
	return [][]byte{first, second}
}

// subscribedAt is an established pair of version v whose D subscribed to origin o on
// channel 1, which L named and advertised, and received its first entry.
func subscribedAt(t *testing.T, v uint64, o wire.OriginID, chain [][]byte) *prototest.Pair {
	t.Helper()
	dc, lc := prototest.Config(wire.RoleDialer, "r", 1), prototest.Config(wire.RoleListener, "s", 2)
	dc.MaxVersion, lc.MaxVersion = v, v
	p := established(t, dc, lc)
	if got := p.D.S.Handshake().Version; got != v {
		t.Fatalf("version %d, want %d", got, v)
	}
	must(t, p.L.S.SetOriginName(o, "seven"))
	must(t, p.L.S.V2().AdvertiseHeads([]wire.Head{{Origin: o, Seq: 2, HLC: 6}}))
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: o}}))
	p.Pump(10)
	must(t, p.L.S.V2().Send(chain[0]))
	p.Pump(10)
	if n := p.D.Count(protocol.EventTxn); n != 1 {
		t.Fatalf("%d entries received", n)
	}
	return p
}

// TestTxnFormat2ByVersion: on version 4 a format-2 entry is sent and received with its
// token; below, Send refuses it (bad-argument) and a receiver closes on it with
// unsupported-txn, as a build that knows format 1 only.
func TestTxnFormat2ByVersion(t *testing.T) {
	o := prototest.Origin(7)
	chain := tokenedChain(t, o)
	p := subscribedAt(t, 4, o, chain)
	must(t, p.L.S.V2().Send(chain[1]))
	p.Pump(10)
	if e := p.D.Last(protocol.EventTxn); e == nil || e.Txn.Token != sessTok || e.Txn.Seq != 2 || p.D.S.Err() != nil {
		t.Fatalf("version 4: %+v, %v", e, p.D.S.Err())
	}
	for _, v := range []uint64{2, 3} {
		p := subscribedAt(t, v, o, chain)
		if err := p.L.S.V2().Send(chain[1]); codeOf(err) != wire.CodeBadArgument {
			t.Errorf("version %d: Send of format 2: %v, want bad-argument", v, err)
		}
		// The same entry sent by hand: the receiver closes as a build without tokens,
		// whatever follows the format byte (here a token it would not know how to skip).
		frame := prototest.RawFrame(wire.TypeData, 0, 1, append(chainHash(chain[1]), chain[1]...))
		_ = p.D.S.Receive(p.Now, frame)
		if err := p.D.S.Err(); err == nil || err.Code != wire.CodeUnsupportedTxn {
			t.Errorf("version %d: DATA of format 2: %v, want unsupported-txn", v, err)
		}
	}
	// Version 1: Offer refuses it, and a TXN1 of format 2 closes the receiver.
	p1 := sending(t, protocol.Limits{}, protocol.Limits{})
	must(t, p1.L.S.SetOriginName(o, "seven"))
	tx1 := txn1(1, append([]byte(nil), chain[1]...))
	if err := p1.L.S.V1().Offer(1, chain[1]); codeOf(err) != wire.CodeBadArgument {
		t.Errorf("version 1: Offer of format 2: %v, want bad-argument", err)
	}
	_ = p1.D.S.Receive(p1.Now, cat(originFrame(o, "seven"), tx1))
	if err := p1.D.S.Err(); err == nil || err.Code != wire.CodeUnsupportedTxn {
		t.Errorf("version 1: TXN1 of format 2: %v, want unsupported-txn", err)
	}
}

func chainHash(b []byte) []byte { h := sha256.Sum256(b); return h[:] }

// leafChain is origin o's first entry, then a format-3 entry: a leaf write it re-originated.
func leafChain(t *testing.T, o wire.OriginID) [][]byte {
	t.Helper()
	first := tokenedChain(t, o)[0]
	l := wire.LeafBlock{Origin: prototest.Origin(0x1e), Seq: 3, HLC: 5, Hash: wire.Hash{3}}
	second, err := (&wire.Txn{Origin: o, Seq: 2, HLC: 6, Prev: sha256.Sum256(first), Leaf: &l,
		Ops: []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k"), Value: []byte("2")}}}).Encode()
	must(t, err)
	return [][]byte{first, second}
}

// TestTxnFormat3ByVersion: on version 4 a format-3 entry is sent and received with its leaf
// block, and one whose leaf block breaks its rules closes the receiver with bad-txn; below, Send and Offer refuse it (bad-argument) and a receiver closes on it with
// unsupported-txn, as a build that knows format 1 only.
func TestTxnFormat3ByVersion(t *testing.T) {
	o := prototest.Origin(7)
	chain := leafChain(t, o)
	p := subscribedAt(t, 4, o, chain)
	must(t, p.L.S.V2().Send(chain[1]))
	p.Pump(10)
	if e := p.D.Last(protocol.EventTxn); e == nil || e.Txn.Seq != 2 || e.Txn.Format() != wire.TxnFormat3 || e.Txn.Leaf.Origin != prototest.Origin(0x1e) || p.D.S.Err() != nil {
		t.Fatalf("version 4: %+v, %v", e, p.D.S.Err())
	}
	// On version 4 a leaf block that breaks its rules is bad-txn: here the entry's own
	// origin as its leaf.
	bad := append([]byte(nil), chain[1]...)
	copy(bad[65:65+16], o[:])
	p4 := subscribedAt(t, 4, o, chain)
	_ = p4.D.S.Receive(p4.Now, prototest.RawFrame(wire.TypeData, 0, 1, append(chainHash(bad), bad...)))
	if err := p4.D.S.Err(); err == nil || err.Code != wire.CodeBadTxn {
		t.Errorf("version 4: DATA of format 3 whose leaf is its origin: %v, want bad-txn", err)
	}
	for _, v := range []uint64{2, 3} {
		p := subscribedAt(t, v, o, chain)
		if err := p.L.S.V2().Send(chain[1]); codeOf(err) != wire.CodeBadArgument {
			t.Errorf("version %d: Send of format 3: %v, want bad-argument", v, err)
		}
		frame := prototest.RawFrame(wire.TypeData, 0, 1, append(chainHash(chain[1]), chain[1]...))
		_ = p.D.S.Receive(p.Now, frame)
		if err := p.D.S.Err(); err == nil || err.Code != wire.CodeUnsupportedTxn {
			t.Errorf("version %d: DATA of format 3: %v, want unsupported-txn", v, err)
		}
	}
	p1 := sending(t, protocol.Limits{}, protocol.Limits{})
	must(t, p1.L.S.SetOriginName(o, "seven"))
	if err := p1.L.S.V1().Offer(1, chain[1]); codeOf(err) != wire.CodeBadArgument {
		t.Errorf("version 1: Offer of format 3: %v, want bad-argument", err)
	}
	_ = p1.D.S.Receive(p1.Now, cat(originFrame(o, "seven"), txn1(1, append([]byte(nil), chain[1]...))))
	if err := p1.D.S.Err(); err == nil || err.Code != wire.CodeUnsupportedTxn {
		t.Errorf("version 1: TXN1 of format 3: %v, want unsupported-txn", err)
	}
}

// copyPairAt is copyPair at version v.
func copyPairAt(t *testing.T, v uint64, o wire.OriginID, pos []wire.CopyPosition) *prototest.Pair {
	t.Helper()
	dc, lc := prototest.Config(wire.RoleDialer, "r", 1), prototest.Config(wire.RoleListener, "s", 2)
	dc.MaxVersion, lc.MaxVersion = v, v
	p := established(t, dc, lc)
	must(t, p.L.S.SetOriginName(o, "seven"))
	must(t, p.D.S.V3().RequestCopy(nil, nil))
	p.Pump(10)
	begin(pos)(p)
	return p
}

// TestChunkFormat2ByVersion: on version 4 a chunk of format 2 goes through with its
// tokens; on version 3 SendChunk refuses it (bad-argument), and a receiver aborts the copy
// on it with bad-chunk, as a build that knows chunk format 1 only.
func TestChunkFormat2ByVersion(t *testing.T) {
	o := prototest.Origin(7)
	chain := prototest.Chain(o, 1, 1, 4)
	pos := []wire.CopyPosition{{Origin: o, Seq: 1, Hash: chain[0].Hash, HLC: 9}}
	body, err := wire.AppendChunk(nil, []byte("t"), []wire.CopyRecord{{Key: []byte("a"), Value: []byte("v"), HLC: 9, Origin: o, Token: sessTok}})
	must(t, err)
	if body[0] != wire.ChunkFormat2 {
		t.Fatalf("format %d", body[0])
	}
	p := copyPairAt(t, 4, o, pos)
	must(t, p.L.S.V3().SendChunk(body))
	p.Pump(10)
	e := p.D.Last(protocol.EventChunk)
	if e == nil || p.D.Last(protocol.EventCopyAborted) != nil {
		t.Fatalf("version 4: chunk %+v, aborted %+v", e, p.D.Last(protocol.EventCopyAborted))
	}
	it := e.Chunk.Records()
	if r, _, _ := it.Next(); r.Token != sessTok {
		t.Fatalf("version 4: the chunk's record carries %v", r.Token)
	}
	p = copyPairAt(t, 3, o, pos)
	if err := p.L.S.V3().SendChunk(body); codeOf(err) != wire.CodeBadArgument {
		t.Errorf("version 3: SendChunk of format 2: %v, want bad-argument", err)
	}
	must(t, p.D.S.Receive(p.Now, prototest.RawFrame(wire.TypeChunk, 0, 1, body)))
	p.Pump(10)
	if ev := p.D.Last(protocol.EventCopyAborted); ev == nil || ev.Err.Code != wire.CodeBadChunk || p.D.S.Err() != nil {
		t.Errorf("version 3: a chunk of format 2: aborted %+v, session %v; want the copy aborted bad-chunk", ev, p.D.S.Err())
	}
	if p.D.Last(protocol.EventChunk) != nil {
		t.Error("version 3: the chunk of format 2 was taken")
	}
}

// TestRangeFormat2ByVersion: on version 4 an answer of format 2 goes through with its
// tokens; on version 3 AnswerRange refuses it (bad-argument) and a receiver closes on it
// with bad-range, as a build that knows range format 1 only.
func TestRangeFormat2ByVersion(t *testing.T) {
	rec := aeRec("t", "c")
	rec.Token = sessTok
	rangeFormatByVersion(t, wire.RangeFormat2, rec, func(r wire.RangeRecord) bool { return r.Token == sessTok })
}

// rangeFormatByVersion answers a range of one record, whose body is of format format, on a
// version-4 and a version-3 connection: on 4 it arrives and kept says the record kept what
// the format carries; on 3 AnswerRange refuses it (bad-argument) and a receiver given the
// frame closes with bad-range.
func rangeFormatByVersion(t *testing.T, format byte, rec wire.RangeRecord, kept func(wire.RangeRecord) bool) {
	t.Helper()
	body := aeBody(t, false, aeThrough, rec)
	if body[0] != format {
		t.Fatalf("format %d, want %d", body[0], format)
	}
	for _, v := range []uint64{3, 4} {
		dc, lc := prototest.Config(wire.RoleDialer, "r", 1), prototest.Config(wire.RoleListener, "s", 2)
		dc.MaxVersion, lc.MaxVersion = v, v
		p := established(t, dc, lc)
		must(t, p.D.S.V3().AskRange(aeAsk()))
		p.Pump(10)
		err := p.L.S.V3().AnswerRange(body)
		if v == 4 {
			must(t, err)
			p.Pump(10)
			e := p.D.Last(protocol.EventRangeAnswered)
			if e == nil || len(e.Range.Records) != 1 || !kept(e.Range.Records[0]) || p.D.S.Err() != nil {
				t.Errorf("version 4: answered %+v, session %v", e, p.D.S.Err())
			}
			continue
		}
		if codeOf(err) != wire.CodeBadArgument {
			t.Errorf("version 3: AnswerRange of format %d: %v, want bad-argument", format, err)
		}
		_ = p.D.S.Receive(p.Now, prototest.RawFrame(wire.TypeRangeRecords, 0, 0, body))
		if err := p.D.S.Err(); err == nil || err.Code != wire.CodeBadRange {
			t.Errorf("version 3: a RANGERECORDS of format %d: %v, want bad-range", format, err)
		}
	}
}

// TestChunkFormat3ByVersion: on version 4 a chunk of format 3 goes through with its via
// blocks, and the copy's vector check reads a via record's delivering identity (the via
// origin and HLC), not its leaf origin, which no vector holds; a via HLC above the
// vector's aborts the copy (bad-chunk); on version 3 SendChunk refuses format 3
// (bad-argument) and a receiver aborts on it with bad-chunk.
func TestChunkFormat3ByVersion(t *testing.T) {
	hub, leaf := prototest.Origin(7), prototest.Origin(9)
	chain := prototest.Chain(hub, 1, 1, 4)
	pos := []wire.CopyPosition{{Origin: hub, Seq: 1, Hash: chain[0].Hash, HLC: 9}}
	chunk := func(viaHLC wire.HLC) []byte {
		body, err := wire.AppendChunk(nil, []byte("t"), []wire.CopyRecord{{Key: []byte("a"), Value: []byte("v"), HLC: 5, Origin: leaf, Via: hub, ViaHLC: viaHLC}})
		must(t, err)
		if body[0] != wire.ChunkFormat3 {
			t.Fatalf("format %d", body[0])
		}
		return body
	}
	p := copyPairAt(t, 4, hub, pos)
	must(t, p.L.S.V3().SendChunk(chunk(9)))
	p.Pump(10)
	e := p.D.Last(protocol.EventChunk)
	if e == nil || p.D.Last(protocol.EventCopyAborted) != nil {
		t.Fatalf("version 4: chunk %+v, aborted %+v", e, p.D.Last(protocol.EventCopyAborted))
	}
	it := e.Chunk.Records()
	if r, _, _ := it.Next(); r.Via != hub || r.ViaHLC != 9 || r.Origin != leaf || r.HLC != 5 {
		t.Fatalf("version 4: the chunk's record %+v", r)
	}
	p = copyPairAt(t, 4, hub, pos)
	must(t, p.D.S.Receive(p.Now, prototest.RawFrame(wire.TypeChunk, 0, 1, chunk(10))))
	p.Pump(10)
	if ev := p.D.Last(protocol.EventCopyAborted); ev == nil || ev.Err.Code != wire.CodeBadChunk || p.D.S.Err() != nil {
		t.Errorf("version 4: a via HLC above the vector's: aborted %+v, session %v; want the copy aborted bad-chunk", ev, p.D.S.Err())
	}
	p = copyPairAt(t, 3, hub, pos)
	if err := p.L.S.V3().SendChunk(chunk(9)); codeOf(err) != wire.CodeBadArgument {
		t.Errorf("version 3: SendChunk of format 3: %v, want bad-argument", err)
	}
	must(t, p.D.S.Receive(p.Now, prototest.RawFrame(wire.TypeChunk, 0, 1, chunk(9))))
	p.Pump(10)
	if ev := p.D.Last(protocol.EventCopyAborted); ev == nil || ev.Err.Code != wire.CodeBadChunk || p.D.S.Err() != nil {
		t.Errorf("version 3: a chunk of format 3: aborted %+v, session %v; want the copy aborted bad-chunk", ev, p.D.S.Err())
	}
}

// TestRangeFormat3ByVersion: on version 4 an answer of format 3 goes through with its via
// blocks; on version 3 AnswerRange refuses it (bad-argument) and a receiver closes on it
// with bad-range.
func TestRangeFormat3ByVersion(t *testing.T) {
	rec := aeRec("t", "c")
	rec.Via, rec.ViaHLC = prototest.Origin(8), 12
	rangeFormatByVersion(t, wire.RangeFormat3, rec, func(r wire.RangeRecord) bool { return r.Via == rec.Via && r.ViaHLC == 12 })
}
