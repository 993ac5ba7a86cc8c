package sim

import (
	"errors"
	"fmt"
	"slices"

	"plait/protocol/wire"
)

// FaultKind is what a faulty peer does to one entry without closing the connection.
type FaultKind string

// Faults a link direction can be armed with.
const (
	// Drop removes the next entry (a version-2 DATA or version-1 TXN1 frame).
	Drop FaultKind = "drop"
	// Corrupt changes one byte of the next version-2 DATA frame's transaction, leaving the
	// hash sent with it. Version 1 carries no per-entry hash: a corrupt TXN1 is caught
	// only at the next entry, after it was applied, so the simulator corrupts only DATA.
	Corrupt FaultKind = "corrupt"
)

type fault struct {
	from string
	kind FaultKind
}

// injection is one fault that hit an entry, and what became of it.
type injection struct {
	kind     FaultKind
	receiver *end
	origin   wire.OriginID
	seq      uint64
	resolved bool
}

// Inject arms the link direction from -> to: the next entry it carries is dropped or
// corrupted. The fault waits until such an entry passes.
func (c *Cluster) Inject(from, to string, kind FaultKind) error {
	l := c.Link(from, to)
	if l == nil {
		return fmt.Errorf("no link %s-%s", from, to)
	}
	if kind != Drop && kind != Corrupt {
		return fmt.Errorf("unknown fault %q", kind)
	}
	l.faults = append(l.faults, &fault{from: from, kind: kind})
	return nil
}

// applyFaults lets the first armed fault of e's direction act on a message.
func (c *Cluster) applyFaults(e *end, d *delivery) {
	l := e.pair.link
	i := slices.IndexFunc(l.faults, func(f *fault) bool { return f.from == e.node.Name })
	if i < 0 {
		return
	}
	f := l.faults[i]
	for _, ef := range entryFrames(d.msg) {
		fr, v := ef.frame, ef.txn
		if fr.Type != wire.TypeData && f.kind == Corrupt {
			continue
		}
		inj := &injection{kind: f.kind, receiver: e.peer, origin: v.Origin, seq: v.Seq}
		end := fr.Offset + wire.HeaderSize + len(fr.Body)
		if f.kind == Drop {
			d.msg = append(slices.Clone(d.msg[:fr.Offset]), d.msg[end:]...)
			if len(d.msg) == 0 {
				d.msg = nil
			}
			e.peer.drops = append(e.peer.drops, inj)
		} else {
			d.msg[end-1] ^= 0x5a // inside the last operation's key or value: still parses
			d.check = inj
		}
		l.faults = slices.Delete(l.faults, i, i+1)
		c.inv.injected(inj)
		c.trace("%s -> %s: %s entry %s/%d", e.node.Name, e.peer.node.Name, f.kind, c.originName(v.Origin), v.Seq)
		return
	}
}

// entryFrame is one entry a message carries: a version-2 DATA or version-1 TXN1 frame.
type entryFrame struct {
	frame wire.Frame
	txn   wire.TxnView
}

// entryFrames lists the entries of a message, up to the first frame that does not parse.
func entryFrames(msg []byte) []entryFrame {
	var out []entryFrame
	r := wire.NewReader(msg, 0)
	for r.More() {
		f, err := r.Next()
		if err != nil {
			break
		}
		var v wire.TxnView
		var perr error
		switch f.Type {
		case wire.TypeData:
			_, v, perr = wire.ParseData(f.Body)
		case wire.TypeTxn1:
			_, v, perr = wire.ParseTxn1(f.Body)
		default:
			continue
		}
		if perr != nil {
			break
		}
		out = append(out, entryFrame{frame: f, txn: v})
	}
	return out
}

// ClearFaults disarms every fault not yet triggered.
func (c *Cluster) ClearFaults() {
	for _, l := range c.links {
		l.faults = nil
	}
}

func asWire(err error, target **wire.Error) bool { return errors.As(err, target) }
