package abi_test

import (
	"testing"

	"plait/protocol"
	"plait/protocol/abi"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// results splits an output batch into its RESULT records and its final STATUS.
func results(t *testing.T, out []byte) ([]abi.ResultMsg, abi.StatusMsg) {
	t.Helper()
	recs, err := abi.Split(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 || recs[len(recs)-1].Kind != abi.KindStatus {
		t.Fatalf("batch does not end with STATUS: %d records", len(recs))
	}
	var rs []abi.ResultMsg
	for _, r := range recs[:len(recs)-1] {
		if r.Kind != abi.KindResult {
			continue
		}
		var m abi.ResultMsg
		if err := abi.Unmarshal(r.Payload, &m); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, m)
	}
	var st abi.StatusMsg
	if err := abi.Unmarshal(recs[len(recs)-1].Payload, &st); err != nil {
		t.Fatal(err)
	}
	return rs, st
}

// TestUnknownCommand: an opcode the ABI does not define is refused with unknown-command
// (class local, about no frame), before and after OpConfigure, and the batch goes on.
//
// internal, the other ABI-level code, is a recovered panic inside the core: no command
// produces it without a defect, so no test does.
func TestUnknownCommand(t *testing.T) {
	unknown := []abi.Op{0x00, abi.OpDecode + 1, 0x7f, 0xff}
	var d abi.Driver
	var b abi.Batch
	for _, op := range unknown {
		b.Raw(op, []byte{1, 2, 3})
	}
	rs, st := results(t, d.Step(b.Bytes()))
	if st.Configured {
		t.Fatal("configured by unknown commands")
	}
	check := func(rs []abi.ResultMsg, first int) {
		t.Helper()
		for i, op := range unknown {
			r := rs[first+i]
			e := r.Err.Wire()
			if r.Op != uint8(op) || r.Index != uint64(first+i) || e == nil || e.Code != wire.CodeUnknownCommand ||
				e.Class != wire.ClassLocal || e.Offset != wire.NoOffset {
				t.Fatalf("op 0x%02x: result %+v, err %+v", uint8(op), r, e)
			}
		}
	}
	if len(rs) != len(unknown) {
		t.Fatalf("%d results", len(rs))
	}
	check(rs, 0)

	// After OpConfigure: the session is untouched by unknown commands around a valid one.
	b.Reset()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.Configure(abi.ConfigMsg{Role: uint8(wire.RoleDialer), Name: "a", Origin: prototest.Origin(1)}))
	for _, op := range unknown {
		b.Raw(op, nil)
	}
	b.Start(prototest.Epoch, prototest.Nonce(1))
	rs, st = results(t, d.Step(b.Bytes()))
	if len(rs) != 2+len(unknown) || rs[0].Err != nil || rs[len(rs)-1].Err != nil {
		t.Fatalf("results %+v", rs)
	}
	check(rs, 1)
	if !st.Configured || st.State != uint8(protocol.StateHandshaking) || st.Err != nil {
		t.Fatalf("status %+v", st)
	}
}
