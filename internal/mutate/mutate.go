package mutate

// Set says which decisions to break. The zero value breaks none.
type Set struct {
	// BreakGapDetection makes a session accept an entry beyond the next expected seq as if
	// it extended the chain: a receiver that no longer detects gaps.
	BreakGapDetection bool
	// IgnoreStampHeld makes a version-4 session sample a stamp's round trip without
	// subtracting how long the peer held the stamp it echoes: an idle link's round trip
	// reads as the seconds between its PINGs.
	IgnoreStampHeld bool
	// BreakRouting makes a replica resubscribe a moved origin from seq 0 instead of its own
	// applied position: the legacy engine's re-streamed tail after a relay failover.
	BreakRouting bool
	// ServeUnsynced makes a replica ignore Config.HoldUnsynced: it serves entries a power
	// loss can still take back, so the origin may reissue their seqs with other content.
	ServeUnsynced bool
	// BreakFailoverIsolation makes a replica that loses a connection resubscribe every
	// other origin too: one origin's failover resetting the others' streams.
	BreakFailoverIsolation bool
	// IgnoreHolds makes retention purge what it may by age and bytes, whatever peers still
	// need: a lagging peer finds its next entries gone.
	IgnoreHolds bool
	// ReplacingCopy makes a base copy replace the receiver's records instead of merging:
	// every copied version is written, and every record of the receiver the copy lacks is
	// deleted (the failure of a copy that wipes the joiner first).
	ReplacingCopy bool
	// CopyCursorApart makes a base copy write each chunk's records and its copy cursor in
	// two writes, the cursor after: a crash between them leaves a cursor that lags its data.
	CopyCursorApart bool
	// DropTombstonesEarly makes retention drop a tombstone once it is older than
	// RetainAge, whether or not every origin was applied past it: a put it beat that is
	// still on its way can then bring the record back.
	DropTombstonesEarly bool
	// RepairInFlight makes anti-entropy repair a peer version this node has not applied
	// yet, instead of leaving it to the log.
	RepairInFlight bool
	// RepairOlder makes anti-entropy write a peer version older than this node's.
	RepairOlder bool
	// RepairBelowHorizon makes anti-entropy write a record this node lacks whatever its
	// version, below the tombstone horizon too: a record deleted here, its tombstone
	// dropped, comes back.
	RepairBelowHorizon bool
	// RepairFromBehind makes anti-entropy write a record this node lacks from a peer that
	// has not applied as far as this node: after a base copy from a node that dropped the
	// record's tombstone, a peer that has not applied the delete brings the record back.
	RepairFromBehind bool
	// MapByHLC makes a replica choose between two cluster maps by their publication's HLC
	// instead of their generation: the later publication wins, as last-writer-wins would
	// have it.
	MapByHLC bool
	// MapRepaired makes a replica write a different cluster map a peer sends over its own
	// whatever its generation, and keep it to itself, as anti-entropy's repair writes a
	// peer's version around the log: generations no longer order maps.
	MapRepaired bool
	// IgnorePlacement makes a sender send every entry whole to every version-4 peer, as if
	// no table were placed: a node is sent and keeps the entries of tables it does not
	// carry.
	IgnorePlacement bool
	// PassCarriedSkip makes a receiver store a run that leaves out a table it carries and
	// move past it: the run's records of that table are never applied there.
	PassCarriedSkip bool
	// AnyRelay makes every peer a source candidate for every origin, whatever tables it
	// carries: a carrier takes an origin from a relay that holds only runs of its table.
	AnyRelay bool
	// CopyPastCarried makes a node end a base copy from a source that does not carry a
	// table it carries even where the copy raises an origin's log past entries that may
	// write that table: their records are never applied there.
	CopyPastCarried bool
	// HoldWhole makes a node claim to hold every table whole (no HOLDS, nothing in a
	// positions answer's holds): a fill, a base copy or a removal takes its records of a
	// table for whole past entries it passed.
	HoldWhole bool
	// DropAtOnce makes a node removed from a table drop its records at once, waiting for
	// no carrier to hold what it held.
	DropAtOnce bool
	// IgnoreLinks makes a sender ignore its links' settings (docs/design.md §24.6): it
	// sends to a peer whatever the two ends' directions say, and sends whole an entry that
	// writes only tables the link excludes, where a run (SKIP) should go.
	IgnoreLinks bool
	// IgnoreTokens makes apply order a key's versions by last-writer-wins alone (HLC, then
	// origin), as if no version carried a fencing token: a stale holder's late write with a
	// clock ahead beats its successor's.
	IgnoreTokens bool
	// SkipLockFence makes a lock home grant with an empty fence: the holder reads without
	// waiting for its predecessors' acknowledged writes.
	SkipLockFence bool
	// SkipRestartQuarantine makes a lock home's table start with its restart quarantine
	// over: a restarted home grants a key whose lease it forgot while its holder still holds it.
	SkipRestartQuarantine bool
	// ConfirmAtOnce makes a lock home answer lock-confirm at once, whether or not it has
	// applied the write: a write is acknowledged before the home has it.
	ConfirmAtOnce bool
	// SkipMoveFloor makes a lock home that a map generation brings keys to grant them, once
	// its move quarantine is over, with its own applied positions as the fence, without
	// the previous home's floor: a holder may read below a write the previous home
	// confirmed.
	SkipMoveFloor bool
	// DelegateAfterReturn makes a delegate answer a home's recall with its positions while
	// its deputy keeps the delegation: it goes on granting the key's leases after the home
	// took the key back (docs/design.md §25.9).
	DelegateAfterReturn bool
	// UnfencedWrites makes a node take a write without a token in a table its map fences
	// (no lock-required): the write orders below every token, so it is lost in silence
	// where the key was written under a lock before, and lands between holders where not.
	UnfencedWrites bool
	// FeedSkipEntry makes a change feed's reader pass every entry whose seq is a multiple
	// of 5 with no event (protocol/feed): a consumer is never given those changes.
	FeedSkipEntry bool
	// FeedRedeliverOnResume makes a change feed started after a position start up to 3
	// seqs before it on each origin: a consumer that resumes is given changes again.
	FeedRedeliverOnResume bool
	// FeedPassNamedRun makes a change feed's reader pass a run held as a skip that names
	// its table with no reread: a consumer never learns of the changes the node was not
	// sent.
	FeedPassNamedRun bool
	// ReoriginateTwiceAfterCrash makes a hub apply its re-originated entry without the
	// leaf's mark (store.Batch.Leaf) in the same write: after a crash its mark is behind
	// what its log carries, and it re-originates the leaf's entries above the mark again
	// (docs/design.md §27.3): one leaf write twice in one hub's log.
	ReoriginateTwiceAfterCrash bool
	// HubHLCForConflicts makes the records of a re-originated leaf write take the hub's
	// entry HLC and origin as their version, instead of the leaf's (docs/design.md §27.1):
	// a leaf's old write re-originated late beats newer writes.
	HubHLCForConflicts bool
	// NeverLoud makes a replica that loses an origin's direct source keep it in the quiet
	// set it told its peers (no QUIET loud): the peers go on withholding that origin's
	// heads, and the replica finds no other source for it.
	NeverLoud bool
	// SilentToSubscribers makes a replica send no head on a quiet link to a peer that
	// subscribes the origin from it once the first went, not even when the stream is
	// behind or the peer's cursor late: a lost tail entry is never asked again.
	SilentToSubscribers bool
}
