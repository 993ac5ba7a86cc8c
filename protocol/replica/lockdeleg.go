package replica

import (
	"slices"
	"strconv"
	"time"

	"plait/protocol/lock"
	"plait/protocol/wire"
)

// Delegation of a key's leases to the node that asks for them (docs/design.md §25.9). With
// Config.Locks.MaxDelegations above 0, a node that asks a remote home for a key its deputy
// does not hold asks for a delegation with it (LockArgs.Delegate); the home delegates the
// key if nobody holds or waits for it, and the node's deputy (lock.Deputy) grants this
// lease and the next ones itself, with no frame. A request for the key at the home recalls
// the delegation: the home asks the delegate (kind lock-recall), which answers once none of
// its leases is live, with its applied positions; the home joins them into its next fence.
// The decisions are protocol/lock's; this file carries them.

// KindLockRecall is asked of a delegate by the key's home: it answers once it holds no live
// lease under the delegation, with its applied positions (a LockReply's fence), and
// grants nothing under it afterwards. A node that does not hold the delegation (it ended,
// or the node restarted) answers at once.
const KindLockRecall = "lock-recall" // table, key, token → fence

// controlLockDelegations is the store's control key of the home's delegations not yet
// returned and of the positions returned ones brought (storedDelegations, CBOR), written
// before a delegation is answered and after each return: a table made after a restart
// takes them back (lock.Table.Restore), since what their delegates confirmed may be applied
// only there, and a fence after the restart must still cover it.
const controlLockDelegations = "lock-delegations"

// storedDelegations is what controlLockDelegations keeps.
type storedDelegations struct {
	Out  []storedDelegation `cbor:"1,keyasint,omitempty"`
	Owed []storedSeqs       `cbor:"2,keyasint,omitempty"`
}

// storedDelegation is one delegation kept under controlLockDelegations.
type storedDelegation struct {
	Table    string `cbor:"1,keyasint"`
	Key      []byte `cbor:"2,keyasint"`
	Token    []byte `cbor:"3,keyasint"`
	Block    uint64 `cbor:"4,keyasint"`
	Delegate string `cbor:"5,keyasint"`
	TTLMS    uint64 `cbor:"6,keyasint"`
}

// delegating reports whether this node delegates and takes delegations.
func (r *Replica) delegating() bool { return r.cfg.Locks.MaxDelegations > 0 }

// deputy is this node's deputy, made at first use: it forgets its delegations with the
// process (the home's notes and recalls cover that), and one made after a restart gives
// back none it does not hold until the leases an earlier one granted have ended.
func (r *Replica) deputy() *lock.Deputy {
	ls := &r.locks
	if ls.deputy == nil && r.delegating() {
		d, err := lock.NewDeputy(r.cfg.Locks, r.now)
		if err != nil {
			return nil
		}
		ls.deputy = d
	}
	return ls.deputy
}

// deputyHolds is the delegation of key this node's deputy holds, when tok is one of its
// tokens (any, for the zero token).
func (r *Replica) deputyHolds(key lock.Key, tok lock.Token) (lock.Delegation, bool) {
	p := r.locks.deputy
	if p == nil {
		return lock.Delegation{}, false
	}
	d, ok := p.Delegation(key)
	if !ok || (!tok.IsZero() && !d.Holds(tok)) {
		return lock.Delegation{}, false
	}
	return d, true
}

// appliedFence is this node's applied positions now.
func (r *Replica) appliedFence() lock.Fence {
	var f lock.Fence
	for _, st := range r.originList {
		if st.applied.Seq > 0 {
			f = append(f, lock.Position{Origin: st.id, Seq: st.applied.Seq})
		}
	}
	return f
}

// lockLocal answers op at once from this node's deputy, with no request: an acquire it
// grants, or refuses lock-held while nobody may wait, and the other kinds of its tokens.
// It reports false when op goes to the home.
func (r *Replica) lockLocal(id RequestID, op LockOp, key lock.Key) bool {
	p := r.locks.deputy
	if p == nil {
		return false
	}
	var res lock.Result
	switch op.Kind {
	case KindLockAcquire:
		if _, ok := r.deputyHolds(key, lock.Token{}); !ok {
			return false
		}
		res = p.Acquire(r.now, key, op.Holder, op.TTL, r.appliedFence())
		if res.Code != lock.CodeGranted && !(res.Code == lock.CodeHeld && op.Wait == 0) {
			return false // a waiter, or a lease the delegation cannot give: the home's
		}
	case KindLockRenew:
		if _, ok := r.deputyHolds(key, op.Token); !ok {
			return false
		}
		res = p.Renew(r.now, key, op.Token, op.TTL)
		if res.Code == lock.CodeNotDelegated {
			res.Code = lock.CodeLost // it runs out where it is; the home does not know it
		}
	case KindLockRelease:
		if _, ok := r.deputyHolds(key, op.Token); !ok {
			return false
		}
		res = p.Release(r.now, key, op.Token)
	default:
		return false // check, fence and confirm go through serveLock, which asks the deputy
	}
	code, msg, body := r.lockAnswer(res)
	r.reqs.last++
	a := Answer{ID: id, Code: code, Message: msg, Body: body}
	r.lockAnswered(op, key, r.now, a)
	r.reqs.answers = append(r.reqs.answers, a)
	if res.Code == lock.CodeGranted || res.Code == lock.CodeRenewed {
		r.renewDelegation(key)
	}
	return true
}

// renewDelegation asks the home to renew the delegation of key this node's deputy holds,
// when it is due (lock.Deputy.RenewDue: less than half its time left, counters left, not
// recalled): a lock-renew with delegate set and the block's first token. It is asked at a
// grant or renewal under the delegation, one at a time, so a key this node keeps locking
// costs one round trip per half delegation time, and one it stopped locking lapses at its
// deadline (the home then wants it back, and the deputy, holding no lease, answers at once).
func (r *Replica) renewDelegation(key lock.Key) {
	ls := &r.locks
	p := ls.deputy
	if p == nil {
		return
	}
	d, due := p.RenewDue(r.now, key)
	if !due {
		return
	}
	if _, busy := ls.renewing[d.Token]; busy {
		return
	}
	home := r.cmap.cur.Home([]byte(key.Table), key.Key)
	if home == "" || home == r.id.Name {
		return
	}
	body, err := wire.Marshal(LockArgs{Table: key.Table, Key: key.Key, Token: tokenBytes(d.Token),
		TTLMS: ceilMS(r.cfg.Locks.MaxDelegationTTL), Delegate: true})
	if !r.check(err) {
		return
	}
	if ls.renewing == nil {
		ls.renewing = map[lock.Token]RequestID{}
	}
	sent, tok := r.now, d.Token
	r.askThen(home, KindLockRenew, wire.ScopeWrite, body, func(id RequestID) { ls.renewing[tok] = id },
		func(a Answer) { r.delegationRenewed(key, tok, sent, a) })
}

// delegationRenewed takes the home's answer to a renewal of the delegation tok of key
// (sent when it was asked): the deputy runs it from sent for the time the home gives it. A
// refusal (recalled, lost, moved) leaves it to lapse. A delegation the deputy no longer
// holds under tok (returned meanwhile) is not taken back: the home may have taken its
// return after it renewed it.
func (r *Replica) delegationRenewed(key lock.Key, tok lock.Token, sent time.Time, a Answer) {
	ls := &r.locks
	if ls.renewing[tok] != a.ID {
		return
	}
	delete(ls.renewing, tok)
	p := ls.deputy
	if a.Code != "" || p == nil {
		return
	}
	res, err := ParseLockReply(a.Body)
	if err != nil || res.Block == 0 || res.Token != tok {
		return
	}
	cur, held := p.Delegation(key)
	if !held || cur.Token != tok {
		return
	}
	ttl := min(r.cfg.Locks.MaxDelegationTTL, lock.HolderDeadline(time.Time{}, res.ExpiresIn, r.cfg.Locks.Drift).Sub(time.Time{}))
	d := lock.Delegation{Key: key, Delegate: r.id.Name, Token: tok, Block: cur.Block, TTL: ttl, Fence: cur.Fence}
	if p.Take(r.now, sent, d) == lock.CodeRenewed {
		ls.renewed++
	}
}

// serveDelegationRenew renews, at the home, the delegation tok of key its delegate asks to
// renew (a lock-renew with delegate set): the answer is the delegation's, as when it was
// granted, with the time it now lasts. Only the delegate may renew it; the renewal is
// noted in the store as the delegation was.
func (r *Replica) serveDelegationRenew(req *wire.Request, t *lock.Table, key lock.Key, tok lock.Token, ttlMS uint64) (wire.Code, string, []byte, bool) {
	d, ok := t.DelegationOf(key, tok)
	if !ok || d.Token != tok || len(req.Path) == 0 || req.Path[0] != d.Delegate {
		return wire.Code(lock.CodeLost), "the token names no delegation of the key to the caller", nil, true
	}
	ttl := min(time.Duration(min(ttlMS, uint64(lock.MaxTTLLimit/time.Millisecond)))*time.Millisecond, r.cfg.Locks.MaxDelegationTTL)
	res := t.RenewDelegation(r.now, key, tok, ttl)
	if res.Code != lock.CodeRenewed {
		code, msg, body := r.lockAnswer(res)
		return code, msg, body, true
	}
	if !r.noteDelegations() {
		return wire.CodeInternal, "the renewed delegation could not be noted in the store", nil, true
	}
	return "", "", r.delegationReply(res.Delegation), true
}

// serveDeputy serves a lock request for a key this node's deputy holds a delegation of,
// for one of its tokens: renew, release, check, fence and confirm (a confirm once the write
// is applied and held for good here, as at a home). They come from this node's own API, or
// from another node's through the home (askDelegate). It reports false when the deputy
// does not hold it.
func (r *Replica) serveDeputy(h *hop, kind string, a LockArgs) (code wire.Code, msg string, body []byte, done, ok bool) {
	key := lock.Key{Table: a.Table, Key: a.Key}
	tok, valid := tokenOf(a.Token)
	if !valid || kind == KindLockAcquire || kind == KindLockRecall {
		return "", "", nil, false, false
	}
	if _, held := r.deputyHolds(key, tok); !held {
		return "", "", nil, false, false
	}
	p := r.locks.deputy
	switch kind {
	case KindLockCheck:
		if !p.Check(r.now, key, tok) {
			return wire.Code(lock.CodeLost), "the token is not the key's live lease by its holder's deadline", nil, true, true
		}
		return "", "", nil, true, true
	case KindLockRenew:
		ttl := time.Duration(min(a.TTLMS, uint64(lock.MaxTTLLimit/time.Millisecond)+1)) * time.Millisecond
		res := p.Renew(r.now, key, tok, ttl)
		if res.Code == lock.CodeNotDelegated {
			res.Code = lock.CodeLost
		}
		code, msg, body = r.lockAnswer(res)
		return code, msg, body, true, true
	case KindLockRelease:
		code, msg, body = r.lockAnswer(p.Release(r.now, key, tok))
		return code, msg, body, true, true
	case KindLockFence:
		l, live := p.Lease(r.now, key, tok)
		if !live {
			return wire.Code(lock.CodeLost), "the token is not the key's live lease", nil, true, true
		}
		code, msg, body = r.lockAnswer(lock.Result{Code: lock.CodeGranted, Lease: l})
		return code, msg, body, true, true
	case KindLockConfirm:
		if len(a.Origin) != len(wire.OriginID{}) || a.Seq == 0 {
			return wire.CodeBadArgument, "a lock-confirm needs the writer's origin (16 bytes) and a seq above 0", nil, true, true
		}
		var o wire.OriginID
		copy(o[:], a.Origin)
		pc := &pendingConfirm{key: lock.Key{Table: a.Table, Key: slices.Clone(a.Key)}, token: tok, origin: o, seq: a.Seq, deputy: true}
		if r.confirmable(pc) || r.cfg.Mutations.ConfirmAtOnce {
			code, msg = r.confirm(pc)
			return code, msg, nil, true, true
		}
		if len(r.locks.confirms) >= r.cfg.LockMaxConfirms {
			return CodeTooManyConfirms, "this node holds " + strconv.Itoa(r.cfg.LockMaxConfirms) + " confirms waiting for their writes", nil, true, true
		}
		pc.hop = r.deferHop(h)
		r.locks.confirms = append(r.locks.confirms, pc)
		return "", "", nil, false, true
	}
	return "", "", nil, false, false
}

// askDelegate keeps a request for one of d's tokens (renew, release, check, fence,
// confirm) that came to the home, to pass on to d's delegate (askDelegates) and answer
// with the delegate's answer: while the home keeps a delegation, live, recalled or ended
// unreturned, only the delegate knows whether the token's lease is live, and which writes
// under it it confirmed (their positions come back with the delegation). This is how a
// write under a delegated lease is taken through any node: the writer's node asks the
// home, the home asks the delegate.
func (r *Replica) askDelegate(h *hop, req *wire.Request, d lock.Delegation) (wire.Code, string, []byte, bool) {
	r.locks.toDelegates = append(r.locks.toDelegates, delegateAsk{hop: r.deferHop(h), delegate: d.Delegate,
		kind: req.Kind, scope: req.Scope, body: slices.Clone(req.Body)})
	return "", "", nil, false
}

// delegateAsk is a request for a delegated token kept to pass on to its delegate.
type delegateAsk struct {
	hop                   hopKey
	delegate, kind, scope string
	body                  []byte
}

// askDelegates passes the kept requests on to their delegates (askDelegate). A delegate
// that holds the delegation no more (it returned it, or restarted) answers that it is not
// the key's home; the token's lease is then no longer live anywhere (a deputy returns a
// delegation only once none of its leases is live, and a restarted one confirms nothing
// it granted before), so that answer becomes lock-lost.
func (r *Replica) askDelegates() {
	ls := &r.locks
	if len(ls.toDelegates) == 0 {
		return
	}
	asks := ls.toDelegates
	ls.toDelegates = nil
	for _, q := range asks {
		if r.reqs.hops[q.hop] == nil {
			continue // given up meanwhile
		}
		k := q.hop
		ls.forwarded++
		if !r.askThen(q.delegate, q.kind, q.scope, q.body, nil, func(a Answer) {
			if a.Code == CodeNotHome || a.Code == wire.Code(lock.CodeNotDelegated) {
				a.Code, a.Message, a.Body = wire.Code(lock.CodeLost), "the token's delegate holds its delegation no more", nil
			}
			r.answerLater(k, a.Code, a.Message, a.Body)
		}) {
			return
		}
	}
}

// delegationReply is a delegation's answer to an acquire that asked for one: the block's
// first token, its size, the fence, and how long it lasts at the home.
func (r *Replica) delegationReply(d lock.Delegation) []byte {
	rep := LockReply{Token: tokenBytes(d.Token), ExpiresInMS: uint64(d.Expiry.Sub(r.now) / time.Millisecond), Block: d.Block}
	for _, p := range d.Fence {
		rep.Fence = append(rep.Fence, storedSeqs{Origin: p.Origin, Seq: p.Seq})
	}
	b, err := wire.Marshal(rep)
	if err != nil {
		return nil
	}
	return b
}

// delegated follows an acquire answered with a delegation: the deputy takes it and grants
// the lease asked under it, and the answer becomes that grant's. A delegation the deputy
// cannot take, or under which it cannot grant, is answered not-delegated: the caller asks
// again (the home recalls it then, and this node answers that it holds nothing).
func (r *Replica) delegated(op LockOp, key lock.Key, sent time.Time, a *Answer, res LockResult) {
	p := r.deputy()
	// The delegation's time is the home's, read from how long it keeps it (ttl·(1+ρ) at
	// most, rounded down to the millisecond): taken less its drift it is at most the ttl the
	// home granted, whatever this node's own bound says.
	ttl := min(r.cfg.Locks.MaxDelegationTTL, lock.HolderDeadline(time.Time{}, res.ExpiresIn, r.cfg.Locks.Drift).Sub(time.Time{}))
	d := lock.Delegation{Key: key, Delegate: r.id.Name, Token: res.Token, Block: res.Block, TTL: ttl, Fence: res.Fence}
	if p == nil {
		*a = Answer{ID: a.ID, Code: wire.Code(lock.CodeNotDelegated), Message: "this node takes no delegation"}
		return
	}
	if c := p.Take(r.now, sent, d); c != lock.CodeDelegated {
		*a = Answer{ID: a.ID, Code: wire.Code(lock.CodeNotDelegated), Message: "the delegation could not be taken: " + string(c)}
		return
	}
	g := p.Acquire(r.now, key, op.Holder, op.TTL, r.appliedFence())
	code, msg, body := r.lockAnswer(g)
	if g.Code == lock.CodeGranted {
		// The holder stops by its own deadline, measured from when it asked.
		code, msg = "", ""
	}
	*a = Answer{ID: a.ID, Code: code, Message: msg, Body: body}
}

// noteDelegations keeps the home's delegations not yet returned in its store.
func (r *Replica) noteDelegations() bool {
	var out storedDelegations
	var owed lock.Fence
	for _, t := range []*lock.Table{r.locks.table, r.locks.leaving} {
		if t == nil {
			continue
		}
		for _, d := range t.Delegations() {
			out.Out = append(out.Out, storedDelegation{Table: d.Key.Table, Key: d.Key.Key, Token: tokenBytes(d.Token), Block: d.Block,
				Delegate: d.Delegate, TTLMS: uint64(d.TTL / time.Millisecond)})
		}
		o, _ := t.FloorOwed()
		owed = lock.Join(owed, o)
	}
	for _, p := range owed {
		out.Owed = append(out.Owed, storedSeqs{Origin: p.Origin, Seq: p.Seq})
	}
	b, err := wire.Marshal(out)
	return r.check(err) && r.check(r.store.PutControl(controlLockDelegations, b))
}

// restoreDelegations gives a table just made the delegations noted in the store.
func (r *Replica) restoreDelegations() {
	raw, err := r.store.Control(controlLockDelegations)
	if !r.check(err) || raw == nil {
		return
	}
	var stored storedDelegations
	if err := wire.Unmarshal(raw, &stored); err != nil {
		r.check(errorf("the control document %s is not a map of delegations: %v", controlLockDelegations, err))
		return
	}
	var ds []lock.Delegation
	for _, s := range stored.Out {
		tok, ok := tokenOf(s.Token)
		if !ok {
			continue
		}
		ds = append(ds, lock.Delegation{Key: lock.Key{Table: s.Table, Key: s.Key}, Delegate: s.Delegate, Token: tok, Block: s.Block,
			TTL: time.Duration(s.TTLMS) * time.Millisecond})
	}
	var owed lock.Fence
	for _, p := range stored.Owed {
		owed = append(owed, lock.Position{Origin: p.Origin, Seq: p.Seq})
	}
	r.locks.table.Restore(ds, owed)
}

// askRecalls asks the delegates of the delegations the home wants back (recalled, ended
// unreturned, or of keys moved away) to return them, every PlacementPoll while one is out
// (at once for one just recalled: recallNow).
func (r *Replica) askRecalls() {
	ls := &r.locks
	if !r.delegating() || r.now.Before(ls.recallNext) {
		return
	}
	var want []lock.Delegation
	for _, t := range []*lock.Table{ls.table, ls.leaving} {
		if t == nil {
			continue
		}
		for _, d := range t.Delegations() {
			if d.Recalled || !r.now.Before(d.Expiry) {
				want = append(want, d)
			}
		}
	}
	if len(want) == 0 {
		return
	}
	ls.recallNext = r.now.Add(r.cfg.PlacementPoll)
	for _, d := range want {
		if _, busy := ls.recalling[d.Token]; busy {
			continue
		}
		body, err := wire.Marshal(LockArgs{Table: d.Key.Table, Key: d.Key.Key, Token: tokenBytes(d.Token)})
		if !r.check(err) {
			return
		}
		if ls.recalling == nil {
			ls.recalling = map[lock.Token]RequestID{}
		}
		key, tok := d.Key, d.Token
		if !r.askThen(d.Delegate, KindLockRecall, wire.ScopeWrite, body, func(id RequestID) { ls.recalling[tok] = id },
			func(a Answer) { r.recallAnswered(key, tok, a) }) {
			return
		}
	}
}

// recallNow makes askRecalls ask at its next run.
func (r *Replica) recallNow() { r.locks.recallNext = time.Time{} }

// recallsDue is when askRecalls next asks (zero: nothing is out to recall, as far as the
// tables' timers tell: an expiry is one of them).
func (r *Replica) recallsDue() time.Time {
	ls := &r.locks
	for _, t := range []*lock.Table{ls.table, ls.leaving} {
		if t == nil {
			continue
		}
		for _, d := range t.Delegations() {
			if d.Recalled || !r.now.Before(d.Expiry) {
				return ls.recallNext
			}
		}
	}
	return time.Time{}
}

// recallAnswered takes a delegate's answer to a recall: its positions return the
// delegation (lock.Table.Return); a refusal is asked again at the next poll.
func (r *Replica) recallAnswered(key lock.Key, tok lock.Token, a Answer) {
	ls := &r.locks
	if ls.recalling[tok] != a.ID {
		return
	}
	delete(ls.recalling, tok)
	if a.Code != "" {
		return
	}
	res, err := ParseLockReply(a.Body)
	if err != nil {
		return
	}
	for _, t := range []*lock.Table{ls.table, ls.leaving} {
		if t == nil {
			continue
		}
		out := t.Return(r.now, key, tok, res.Fence, r.lockFence())
		if out.Code == lock.CodeReturned {
			if t == ls.table {
				r.lockEvents(out.Events)
			}
			r.noteDelegations()
			if ls.leaving != nil && len(ls.leaving.Delegations()) == 0 {
				ls.leaving = nil
			}
			return
		}
	}
}

// serveLockRecall answers a home's recall of a delegation this node holds: at once with
// its applied positions when none of its leases under it is live (or it holds none: it
// ended, or the node restarted), else once the last ends (serveRecalls). The deputy grants
// nothing under it from the recall on.
func serveLockRecall(r *Replica, h *hop, req *wire.Request) (wire.Code, string, []byte, bool) {
	var a LockArgs
	if err := wire.Unmarshal(req.Body, &a); err != nil || !wire.ValidName(a.Table) {
		return wire.CodeBadArgument, "a lock-recall body is a map of a table name, a key and a token", nil, true
	}
	tok, ok := tokenOf(a.Token)
	if !ok {
		return wire.CodeBadArgument, "a lock-recall needs a token of " + strconv.Itoa(lock.TokenBytes) + " bytes", nil, true
	}
	key := lock.Key{Table: a.Table, Key: slices.Clone(a.Key)}
	if p := r.deputy(); p != nil {
		p.Recall(r.now, key, tok)
	}
	pr := &pendingRecall{key: key, token: tok}
	if code, msg, body, done := r.tryReturn(pr); done {
		return code, msg, body, true
	}
	pr.hop = r.deferHop(h)
	r.locks.recalls = append(r.locks.recalls, pr)
	return "", "", nil, false
}

// pendingRecall is a recall waiting for the delegate's last lease under it to end.
type pendingRecall struct {
	hop   hopKey
	key   lock.Key
	token lock.Token
}

// tryReturn gives back pr's delegation if no lease under it is live: the answer is this
// node's applied positions, which cover every write it confirmed under it (it confirms only
// what it applied and holds for good).
func (r *Replica) tryReturn(pr *pendingRecall) (wire.Code, string, []byte, bool) {
	// The deputy is made by the first recall after a restart if not before: it then waits
	// out the leases a deputy before the restart may have granted (lock.NewDeputy).
	if p := r.deputy(); p != nil && !r.cfg.Mutations.DelegateAfterReturn {
		if res := p.Return(r.now, pr.key, pr.token); res.Code == lock.CodeHeld {
			return "", "", nil, false
		}
	}
	var rep LockReply
	for _, q := range r.appliedFence() {
		rep.Fence = append(rep.Fence, storedSeqs{Origin: q.Origin, Seq: q.Seq})
	}
	b, err := wire.Marshal(rep)
	if err != nil {
		return wire.CodeInternal, err.Error(), nil, true
	}
	return "", "", b, true
}

// serveRecalls answers the recalls whose leases ended, and forgets those given up.
func (r *Replica) serveRecalls() {
	ls := &r.locks
	if len(ls.recalls) == 0 {
		return
	}
	keep := ls.recalls[:0]
	for _, pr := range ls.recalls {
		if r.reqs.hops[pr.hop] == nil {
			continue
		}
		code, msg, body, done := r.tryReturn(pr)
		if !done {
			keep = append(keep, pr)
			continue
		}
		r.answerLater(pr.hop, code, msg, body)
	}
	clear(ls.recalls[len(keep):])
	ls.recalls = keep
}

// deputyDue is when the deputy next has work (a lease's end, a delegation's deadline).
func (r *Replica) deputyDue() time.Time {
	if p := r.locks.deputy; p != nil {
		return p.Next()
	}
	return time.Time{}
}
