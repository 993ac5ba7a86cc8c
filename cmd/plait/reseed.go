package main

import (
	"crypto/rand"
	"fmt"
	"io"
	"math/big"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// reseed is `plait reseed --data DIR`: the way out of an origin rewind (docs/contract.md
// §21). On a stopped node's data directory it plans and writes, in one atomic write, a new
// origin id for the node (store.ReseedStore): its old origin becomes a foreign one whose
// entries stream back from the peers, and every entry of it the directory held is re-issued
// under the new id. RocksDB's lock on the directory refuses a running node's.
func reseed(args []string, stdout, stderr io.Writer) int {
	s, code := openStopped("plait reseed", args, stderr)
	if s == nil {
		return code
	}
	defer s.Close()
	old, _ := s.Identity() // read when the store opened: it does not fail
	n, err := newOriginAbove(old.Origin)
	if err != nil {
		fmt.Fprintln(stderr, "plait reseed:", err)
		return 1
	}
	rs, err := store.ReseedStore(s, n)
	if err == nil {
		err = s.Sync()
	}
	if err != nil {
		fmt.Fprintln(stderr, "plait reseed:", err)
		return 1
	}
	fmt.Fprintf(stdout, "node %s: origin %x is now %x; %d entries of the old origin re-issued under the new one, "+
		"its log cut back to seq %d; start the node: its peers stream the old origin's entries back\n",
		old.Name, old.Origin[:], n[:], len(rs.Entries), rs.Cut.Seq)
	return 0
}

// newOriginAbove draws a random origin id above old, uniformly among the ids above it: a
// re-issued entry's version then supersedes the old origin's at the same HLC wherever a
// peer holds both (docs/design.md §20). (Drawing any id and keeping it when above failed
// about once in 65 reseeds: an old id near the top leaves few ids above it.)
func newOriginAbove(old wire.OriginID) (wire.OriginID, error) {
	lo := new(big.Int).SetBytes(old[:])
	above := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(8*len(old))), lo) // ids above old, old+1 included
	above.Sub(above, big.NewInt(1))
	if above.Sign() <= 0 {
		return wire.OriginID{}, fmt.Errorf("no origin id is above %x", old[:])
	}
	d, err := rand.Int(rand.Reader, above)
	if err != nil {
		return wire.OriginID{}, err
	}
	var n wire.OriginID
	d.Add(d, lo).Add(d, big.NewInt(1)).FillBytes(n[:])
	return n, nil
}
