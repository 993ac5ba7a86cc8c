package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// demoLog is a node's log in arrival order, and the records it holds.
type demoLog struct {
	entries [][]byte
	records map[string]demoRecord
	applied map[wire.OriginID]protocol.Cursor
}

type demoRecord struct {
	value []byte
	hlc   wire.HLC
}

func newDemoLog() *demoLog {
	return &demoLog{records: map[string]demoRecord{}, applied: map[wire.OriginID]protocol.Cursor{}}
}

// apply applies a checked transaction by last-writer-wins and appends it to the log.
func (l *demoLog) apply(v wire.TxnView) {
	it := v.Ops()
	for op, ok := it.Next(); ok; op, ok = it.Next() {
		k := string(op.Table) + "/" + string(op.Key)
		if old, ok := l.records[k]; ok && old.hlc > v.HLC {
			continue
		}
		l.records[k] = demoRecord{value: append([]byte(nil), op.Value...), hlc: v.HLC}
	}
	l.entries = append(l.entries, append([]byte(nil), v.Raw()...))
	l.applied[v.Origin] = protocol.Cursor{Origin: v.Origin, Seq: v.Seq, Hash: v.Hash()}
}

func (l *demoLog) digest() (int, string) {
	keys := make([]string, 0, len(l.records))
	for k := range l.records {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(l.records[k].value))
		h.Write(l.records[k].value)
	}
	return len(keys), hex.EncodeToString(h.Sum(nil))[:16]
}

func (l *demoLog) vector() []protocol.Cursor {
	var v []protocol.Cursor
	for _, c := range l.applied {
		v = append(v, c)
	}
	slices.SortFunc(v, func(a, b protocol.Cursor) int { return slices.Compare(a.Origin[:], b.Origin[:]) })
	return v
}

// demo replicates node A's log (its own writes and two relayed origins, interleaved) to
// node B over version 1, drops the connection half way, resumes from B's durable cursor,
// and compares digests. A wrong secret is refused first.
func demo(out io.Writer) error {
	a := newDemoLog()
	chains := [][]prototest.Entry{
		prototest.Chain(prototest.Origin(1), 600, 2, 64),
		prototest.Chain(prototest.Origin(2), 300, 1, 64),
		prototest.Chain(prototest.Origin(3), 300, 3, 32),
	}
	// The origins' names: A's own, and the two it relays. A sender names every origin
	// before offering its entries (each is announced in an ORIGIN frame).
	names := map[wire.OriginID]string{prototest.Origin(1): "A", prototest.Origin(2): "X", prototest.Origin(3): "Y"}
	for i := 0; i < 600; i++ {
		for _, c := range chains {
			if i < len(c) {
				v, err := wire.ParseTxn(c[i].Raw)
				if err != nil {
					return err
				}
				a.apply(v)
			}
		}
	}
	fmt.Fprintf(out, "node A holds %d transactions of 3 origins\n", len(a.entries))

	cfgA := prototest.ConfigV1(wire.RoleListener, "A", 1)
	cfgB := prototest.ConfigV1(wire.RoleDialer, "B", 9)
	wrong := cfgB
	wrong.Secret = []byte("not-the-cluster-secret")
	p, err := prototest.NewPair(wrong, cfgA)
	if err != nil {
		return err
	}
	p.Pump(10)
	fmt.Fprintf(out, "B with a wrong secret: %v\n", p.D.S.Err())
	if e := p.D.S.Err(); e == nil || e.Code != wire.CodeAuthFailed {
		return fmt.Errorf("a wrong secret was not refused")
	}

	b := newDemoLog()
	var cursor uint64 // B's durable scalar cursor in A's arrival order
	for round := 1; round <= 2; round++ {
		p, err := prototest.NewPair(cfgB, cfgA)
		if err != nil {
			return err
		}
		p.Pump(10)
		for o, name := range names {
			if err := p.L.S.SetOriginName(o, name); err != nil {
				return err
			}
		}
		if err := p.D.S.Subscribe(cursor, b.vector()); err != nil {
			return err
		}
		p.Pump(10)
		sub := p.L.Last(protocol.EventSubscribed)
		if sub == nil {
			return fmt.Errorf("round %d: no subscription: %v", round, p.L.S.Err())
		}
		next, limit := sub.Position, uint64(len(a.entries))
		if round == 1 {
			limit /= 2 // the connection drops half way
		}
		seen := len(p.D.Events)
		for next < limit {
			for next < limit && p.L.S.SendBudget() > len(a.entries[next])+32 {
				if err := p.L.S.Offer(next+1, a.entries[next]); err != nil {
					return err
				}
				next++
			}
			p.Pump(100)
			for _, ev := range p.D.Events[seen:] {
				if ev.Kind == protocol.EventTxn {
					b.apply(ev.Txn)
				}
				if ev.Position > cursor && (ev.Kind == protocol.EventTxn || ev.Kind == protocol.EventDuplicate) {
					cursor = ev.Position // durable: the demo's store is memory
				}
			}
			seen = len(p.D.Events)
			if cursor > 0 {
				if err := p.D.S.Ack(cursor); err != nil {
					return err
				}
			}
			if err := p.D.S.Err(); err != nil {
				return err
			}
		}
		p.Pump(10)
		st := p.D.S.Stats()
		var named []string
		for _, ev := range p.D.Events {
			if ev.Kind == protocol.EventOriginNamed {
				named = append(named, ev.Name)
			}
		}
		slices.Sort(named)
		fmt.Fprintf(out, "round %d: B received %d, duplicates %d, gaps %d; cursor at %d of %d; held %d bytes; origins named %v\n",
			round, st.TxnsReceived, st.Duplicates, st.Gaps, cursor, len(a.entries), p.D.S.HeldBytes(), named)
		if len(named) != len(names) {
			return fmt.Errorf("round %d: B learned the names %v, want all %d", round, named, len(names))
		}
	}
	na, da := a.digest()
	nb, db := b.digest()
	fmt.Fprintf(out, "digest A: %d records %s\ndigest B: %d records %s\n", na, da, nb, db)
	if na != nb || da != db {
		return fmt.Errorf("digests differ")
	}
	fmt.Fprintln(out, "digests equal")
	return nil
}
