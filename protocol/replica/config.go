package replica

import (
	"time"

	"plait/internal/mutate"

	"plait/protocol"
	"plait/protocol/lock"
)

// Configuration: what a replica needs besides its store, and the defaults.

// Config is what a replica needs besides its store.
type Config struct {
	// MinVersion and MaxVersion bound the protocol versions its sessions offer (0: the
	// oldest and the newest implemented). A node run with MaxVersion 1 is a legacy peer.
	MinVersion, MaxVersion uint64
	Secret                 []byte
	// TLSAuthenticated: the shell runs every peer link over mutual TLS, so peers are
	// authenticated without a secret (status says authenticated).
	TLSAuthenticated bool
	Capabilities     []string
	Limits           protocol.Limits // every session's limits
	Write            WriteLimits

	// MoveDelay is how long another candidate's advertised head must stay ahead of an
	// origin's source before the origin moves to it (docs/contract.md §10; default 2 s).
	MoveDelay time.Duration
	// StallTimeout is how long an origin's source may advertise a head above the applied
	// seq without an entry being applied before the replica treats it as a gap: the
	// [T, head] hole of an entry lost at the tail of a stream, which no later entry would
	// reveal. It resumes the channel from the applied seq and counts a gap and a resend
	// request (default 3 s).
	StallTimeout time.Duration
	// Health (health.go, docs/contract.md §8.7). HealthyLag: a remote origin whose lag in
	// time is within it is healthy (default 1 s). HealthWindow: an origin behind whose lag
	// in entries is above its sample this long ago is falling behind (default 10 s).
	// LagSampleEvery and LagHistory: the lag history samples every remote origin this
	// often (default 1 s) and keeps this long of them (default 15 min; at most
	// MaxLagSamples samples an origin).
	HealthyLag     time.Duration
	HealthWindow   time.Duration
	LagSampleEvery time.Duration
	LagHistory     time.Duration
	// HeadsInterval is how long a moved head may wait before it goes to a peer that does
	// not take that origin from this node (advertise): such heads only inform the peer's
	// routing and lag, and sending each at once costs a mesh of N nodes about N² HEADS a
	// write. Heads to the origin's subscribers, new advertisements, withdrawals and a new
	// connection's first heads go at once (default 500 ms; negative: every head at once).
	HeadsInterval time.Duration
	// DivergenceRetry is how long a (peer, origin) pair whose channel diverged is left out
	// of the candidates, unless the connection is made again (default 10 s).
	DivergenceRetry time.Duration

	// Links are this node's settings for the links to its peers, by peer name (links.go,
	// docs/design.md §24.6): a peer not named here is linked both ways with nothing
	// excluded. SetLink changes one while the replica runs.
	Links map[string]LinkSettings

	// HoldUnsynced keeps entries that are not yet durable against power loss from peers:
	// the local origin's entries beyond the last Synced, and, for version-1 peers, arrival
	// positions beyond it (so a power loss cannot renumber positions a peer holds). Without
	// it everything applied is served at once (a process crash loses nothing applied).
	HoldUnsynced bool

	// Retention (bounded history, retention.go). RetainAge: an entry may be purged once its
	// HLC timestamp is older than this (default 72 h). RetainBytes: past this many bytes of
	// origin logs on this node (transaction encodings), the oldest entries in arrival order
	// are purged first (0: no bound). RetainHold: an entry that a holding peer has not
	// acknowledged is kept whatever the two bounds say, until the peer's hold has not
	// advanced for this long (default 24 h).
	RetainAge   time.Duration
	RetainBytes uint64
	RetainHold  time.Duration
	// PurgeStep bounds the entries one retention step examines (default 4096), and
	// RetentionInterval is how often retention runs while the last step had nothing more
	// to purge (default 1 s).
	PurgeStep         int
	RetentionInterval time.Duration

	// Base copies (basecopy.go). MaxCopies bounds the copies this node serves at once
	// (default 2; -1: none): one more is answered copy-busy. CopyChunk is the size a copy's
	// chunks aim at (default 1 MiB, MinCopyChunk to the frame body limit; a record larger
	// goes alone). CopyRetry is how long a copy stopped early waits before it resumes, and
	// how long a peer that answered copy-busy is passed over (default 2 s).
	MaxCopies int
	CopyChunk int
	CopyRetry time.Duration

	// Anti-entropy (antientropy.go, docs/design.md §19). AntiEntropyInterval is how often
	// this node asks each peer about its next range (default 1 s; negative: no passes of
	// its own, though it still answers). AntiEntropyRange bounds the records of a range
	// (default 256, 1 to wire.MaxRangeCount). AntiEntropyBytes bounds an answer's records
	// (default 256 KiB, MinCopyChunk to the frame body limit; a record larger goes alone).
	AntiEntropyInterval time.Duration
	AntiEntropyRange    int
	AntiEntropyBytes    int

	// MaxClockOffset bounds clock offset (clock.go): an entry more than this ahead of the
	// node's wall clock is held back, and a node most of its measured peers see more than
	// this off refuses local writes (default DefaultMaxClockOffset; negative: no bound).
	MaxClockOffset time.Duration

	// ApplyRetries is how many times in a row a received entry may fail to apply for a
	// reason of its own before its origin shows StuckApplyFailed (retry.go; default
	// DefaultApplyRetries, at least 1). ApplyRetryDelay is the first retry's backoff,
	// doubling up to MaxApplyRetryDelay (default DefaultApplyRetryDelay).
	ApplyRetries    int
	ApplyRetryDelay time.Duration

	// The cluster map and requests between nodes (clustermap.go, requests.go,
	// docs/design.md §23). MaxMembers bounds the member entries kept (default
	// DefaultMaxMembers, 1 to MaxMemberEntries); one more is refused and counted.
	// MaxRequestHops bounds the nodes a request may pass (default 8, 2 to
	// wire.MaxRequestPath). RequestTimeout is how long a request this node starts waits
	// for its answer (default 5 s, 1 ms to wire.MaxRequestTimeout).
	MaxMembers     int
	MaxRequestHops int
	RequestTimeout time.Duration

	// MaxNamedFeeds bounds the named feeds this node keeps (namedfeeds.go, default
	// DefaultMaxNamedFeeds; -1: none); one more is refused and counted.
	MaxNamedFeeds int

	// Hub, when not empty, makes this node a leaf of the node of that name (hub.go,
	// docs/design.md §27): it takes no peer but its hub, and its hub re-originates its
	// writes. MaxLeaves is how many leaves this node accepts as a hub (0: none, not a hub);
	// one more is refused with too-many-leaves and counted. LeafHold bounds how long a hub's
	// retention holds its logs for a leaf that is away (default DefaultLeafHold; -1: not
	// at all).
	Hub       string
	MaxLeaves int
	LeafHold  time.Duration

	// PlacementPoll is how often a node that no longer carries a table asks each of its
	// carriers whether it holds what this node held (tablemove.go; default
	// DefaultPlacementPoll).
	PlacementPoll time.Duration

	// Locks are this node's bounds as a lock home (locks.go, docs/design.md §25.5): zero
	// fields take the defaults (DefaultLockMaxTTL, DefaultLockMaxWait, DefaultMaxLeases,
	// DefaultLockMaxWaiters, lock.DefaultDrift; with MaxDelegations above 0,
	// DefaultDelegationBlock and twice MaxTTL for the delegation's); a negative MaxWait is
	// 0, no request waits. MaxDelegations 0 delegates nothing. OffsetBound is not read: it is
	// MaxClockOffset, so a node whose guard is off (negative) is refused as a home.
	// LockMaxConfirms bounds the lock-confirm requests waiting at the home for the writes
	// they name to be applied (default DefaultLockMaxConfirms); one more is refused
	// too-many-confirms.
	Locks           lock.Config
	LockMaxConfirms int
	// LockMaxMoves bounds the moves a home keeps waiting for their previous homes' floors
	// (locks.go; default DefaultLockMaxMoves): a map that would make one more merges them
	// all into one that waits for every member's floor, which covers each of theirs.
	LockMaxMoves int

	// NewSession makes the protocol core of one connection (default NativeSession).
	NewSession func(protocol.Config) (Session, error)

	// Mutations break a decision on purpose, for the mutation check's tests only; the zero
	// value breaks nothing. Sessions get them too (the native core's gap detection).
	Mutations mutate.Set
}

// WriteLimits bound a local write (docs/contract.md §6.1). Zero fields take the defaults.
type WriteLimits struct {
	MaxKey   int // default 1024 bytes
	MaxValue int // default 1 MiB
	MaxTxn   int // default 8 MiB of transaction encoding
}

// Default bounds and delays.
const (
	DefaultMaxKey           = 1024
	DefaultMaxValue         = 1 << 20
	DefaultMaxTxn           = 8 << 20
	DefaultMoveDelay        = 2 * time.Second
	DefaultDivergenceRetry  = 10 * time.Second
	DefaultStallTimeout     = 3 * time.Second
	DefaultHeadsInterval    = 500 * time.Millisecond
	DefaultRetainAge        = 72 * time.Hour
	DefaultRetainHold       = 24 * time.Hour
	DefaultPurgeStep        = 4096
	DefaultRetentionEvery   = time.Second
	DefaultMaxCopies        = 2
	DefaultCopyChunk        = 1 << 20
	MinCopyChunk            = 1 << 10
	DefaultCopyRetry        = 2 * time.Second
	DefaultAntiEntropy      = time.Second
	DefaultAntiEntropyRange = 256
	DefaultAntiEntropyBytes = 256 << 10
	DefaultMaxMembers       = 1024
	DefaultMaxNamedFeeds    = 64
	DefaultLeafHold         = 24 * time.Hour
	MaxMemberEntries        = 65536
	DefaultMaxRequestHops   = 8
	DefaultRequestTimeout   = 5 * time.Second
	DefaultPlacementPoll    = time.Second
	// A lease of a minute covers a transaction's work; a wait below RequestTimeout's
	// default leaves the answer time to travel back before the caller gives up.
	DefaultLockMaxTTL      = time.Minute
	DefaultLockMaxWait     = 2 * time.Second
	DefaultMaxLeases       = 10000
	DefaultLockMaxWaiters  = 1000
	DefaultLockMaxConfirms = 1024
	DefaultLockMaxMoves    = 16
	// The native node's --lock-max-delegations (the replica's zero is off): as many
	// delegations as a home keeps confirms waiting, each a few hundred bytes. With
	// MaxDelegations above 0, a zero DelegationBlock takes DefaultDelegationBlock (counters
	// are 64 bits: a block of 1024 spends nothing that matters, and a key locked 1024 times
	// in one delegation costs one round trip to take another), and a zero MaxDelegationTTL
	// twice MaxTTL (so that a lease of MaxTTL fits under a delegation renewed at half its
	// time: docs/design.md §25.9).
	DefaultLockMaxDelegations = 1024
	DefaultDelegationBlock    = 1024
	maxTableName              = 64
	arrivalBatch              = 64
	maxMoves                  = 1024
)

func (c Config) withDefaults() Config {
	if c.Write.MaxKey == 0 {
		c.Write.MaxKey = DefaultMaxKey
	}
	if c.Write.MaxValue == 0 {
		c.Write.MaxValue = DefaultMaxValue
	}
	if c.Write.MaxTxn == 0 {
		c.Write.MaxTxn = DefaultMaxTxn
	}
	if c.MoveDelay == 0 {
		c.MoveDelay = DefaultMoveDelay
	}
	if c.PlacementPoll == 0 {
		c.PlacementPoll = DefaultPlacementPoll
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.HealthyLag == 0 {
		c.HealthyLag = DefaultHealthyLag
	}
	if c.HealthWindow == 0 {
		c.HealthWindow = DefaultHealthWindow
	}
	if c.LagSampleEvery == 0 {
		c.LagSampleEvery = DefaultLagSampleEvery
	}
	if c.LagHistory == 0 {
		c.LagHistory = DefaultLagHistory
	}
	switch {
	case c.HeadsInterval == 0:
		c.HeadsInterval = DefaultHeadsInterval
	case c.HeadsInterval < 0:
		c.HeadsInterval = 0 // advertise sends every head at once
	}
	if c.DivergenceRetry == 0 {
		c.DivergenceRetry = DefaultDivergenceRetry
	}
	if c.RetainAge == 0 {
		c.RetainAge = DefaultRetainAge
	}
	if c.RetainHold == 0 {
		c.RetainHold = DefaultRetainHold
	}
	if c.PurgeStep == 0 {
		c.PurgeStep = DefaultPurgeStep
	}
	if c.RetentionInterval == 0 {
		c.RetentionInterval = DefaultRetentionEvery
	}
	switch c.MaxCopies {
	case 0:
		c.MaxCopies = DefaultMaxCopies
	case -1:
		c.MaxCopies = 0
	}
	if c.CopyRetry == 0 {
		c.CopyRetry = DefaultCopyRetry
	}
	if c.AntiEntropyInterval == 0 {
		c.AntiEntropyInterval = DefaultAntiEntropy
	}
	if c.MaxMembers == 0 {
		c.MaxMembers = DefaultMaxMembers
	}
	switch c.LeafHold {
	case 0:
		c.LeafHold = DefaultLeafHold
	case -1:
		c.LeafHold = 0
	}
	switch c.MaxNamedFeeds {
	case 0:
		c.MaxNamedFeeds = DefaultMaxNamedFeeds
	case -1:
		c.MaxNamedFeeds = 0
	}
	if c.MaxRequestHops == 0 {
		c.MaxRequestHops = DefaultMaxRequestHops
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.AntiEntropyRange == 0 {
		c.AntiEntropyRange = DefaultAntiEntropyRange
	}
	if c.MaxClockOffset == 0 {
		c.MaxClockOffset = DefaultMaxClockOffset
	}
	if c.ApplyRetries == 0 {
		c.ApplyRetries = DefaultApplyRetries
	}
	if c.ApplyRetryDelay == 0 {
		c.ApplyRetryDelay = DefaultApplyRetryDelay
	}
	if c.Locks.MaxTTL == 0 {
		c.Locks.MaxTTL = DefaultLockMaxTTL
	}
	switch {
	case c.Locks.MaxWait == 0:
		c.Locks.MaxWait = DefaultLockMaxWait
	case c.Locks.MaxWait < 0: // the zero value is the default: a negative one is "none waits"
		c.Locks.MaxWait = 0
	}
	if c.Locks.MaxLeases == 0 {
		c.Locks.MaxLeases = DefaultMaxLeases
	}
	if c.Locks.MaxWaiters == 0 {
		c.Locks.MaxWaiters = DefaultLockMaxWaiters
	}
	if c.Locks.Drift == 0 {
		c.Locks.Drift = lock.DefaultDrift
	}
	c.Locks.OffsetBound = max(c.MaxClockOffset, 0)
	if c.Locks.MaxDelegations > 0 {
		if c.Locks.DelegationBlock == 0 {
			c.Locks.DelegationBlock = DefaultDelegationBlock
		}
		if c.Locks.MaxDelegationTTL == 0 {
			c.Locks.MaxDelegationTTL = min(2*c.Locks.MaxTTL, lock.MaxTTLLimit)
		}
	}
	if c.LockMaxConfirms == 0 {
		c.LockMaxConfirms = DefaultLockMaxConfirms
	}
	if c.LockMaxMoves <= 0 {
		c.LockMaxMoves = DefaultLockMaxMoves
	}
	if c.NewSession == nil {
		c.NewSession = NativeSession
	}
	c.Limits = c.Limits.WithDefaults()
	if c.CopyChunk == 0 {
		c.CopyChunk = min(DefaultCopyChunk, int(c.Limits.MaxFrameBody))
	}
	if c.AntiEntropyBytes == 0 {
		c.AntiEntropyBytes = min(DefaultAntiEntropyBytes, int(c.Limits.MaxFrameBody))
	}
	return c
}
