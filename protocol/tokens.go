package protocol

import (
	"strconv"

	"plait/protocol/wire"
)

// Fencing tokens (docs/design.md §25.4) travel in version 4's later formats: transaction
// format 2, chunk format 2 and range format 2; a hub's re-originated leaf writes
// (docs/design.md §27) in transaction format 3, chunk format 3 and range format 3 (a
// record's via block). A connection below version 4 carries none of them: received, each is
// what a build without them makes of it, a format it does not know (unsupported-txn,
// bad-chunk, bad-range), checked before anything after the format byte; to be sent, each
// is refused (bad-argument), since the peer would close on it. So a version-3 peer sees
// exactly what it saw before tokens and hubs existed.

// tokensCarried reports whether this connection carries the formats with tokens.
func (s *Session) tokensCarried() bool { return s.info.Version >= 4 }

// txnFormats is the highest transaction format this connection carries: format 1 below
// version 4; formats 2 (a token) and 3 (a leaf block) on version 4.
func (s *Session) txnFormats() byte {
	if s.tokensCarried() {
		return wire.TxnFormat3
	}
	return wire.TxnFormat1
}

// formatNotCarried says why a chunk or range body of format format is not one this
// connection carries ("" when it is).
func (s *Session) formatNotCarried(what string, format byte) string {
	if format <= 1 || s.tokensCarried() {
		return ""
	}
	return what + " format 0x" + strconv.FormatUint(uint64(format), 16) + "; a version-" +
		strconv.FormatUint(s.info.Version, 10) + " connection carries format 1 only"
}
