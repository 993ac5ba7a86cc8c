package fuzz

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"path"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"plait/conformance"
	"plait/protocol"
	"plait/protocol/abi"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// FuzzDiff feeds the same message to every build of the core the repository holds, through
// the ABI of shells/wasm/ABI.md, and compares what they answer:
//
//   - native: this commit's core, an abi.Driver in this process;
//   - wasm: this commit's core compiled to WASM with the release command (built once per
//     run, or PLAIT_CORE_WASM), run under wazero;
//   - every frozen release of conformance/RELEASES.md (conformance/releases/<name>/core.wasm).
//
// Each build gets the message twice:
//
//  1. DECODE: a batch holding one DECODE command (stateless: wire.DecodeMessage with the
//     default limits, outside any session).
//  2. RECEIVE into an established session: the build under test is a dialer ("a", origin
//     1, the default version range) set up against a native session of this build ("b",
//     origin 2, limited to the version v under test) by a fixed script of ABI commands and
//     messages (diffSetup: the setup of FuzzDecode for version 1, that of FuzzSession for
//     version 2), then one batch holding RECEIVE(message).
//
// The current build runs sessions at its newest version and at the newest version of each
// release; a release runs its session at its newest version (1 for 0.1, 2 for 0.2).
//
// # Properties
//
//   - native and wasm: every output batch is byte-identical: the DECODE batch, every batch
//     of the setups and the RECEIVE batch of every version.
//   - a release and this build (its native answers; identical to wasm by the above):
//     DECODE: when every frame of the input up to where either build stopped has a type
//     both builds implement, or both do not (diffShared: the types of the release's
//     protocol versions), both accept, or both reject with the same code and class at the
//     same offset. RECEIVE at the release's newest version: both stay established, or both
//     close with the same code and class, at the same offset, both by the peer's CLOSE or
//     both of their own.
//   - every other difference fails, unless testdata/known_differences.txt lists it: one
//     intended difference per line, with its reason (loadKnownDifferences documents the
//     format).
//   - DECODED's "known" flag of every frame is what the build implements (diffBuild.implements).
//   - no build traps; a call that runs for more than callTimeout crashes the process.
//
// To save a WASM instantiation per input (diffwasm_test.go) a session instance is saved once
// established and restored before each input; every diffCrossCheckEvery-th input of each
// session also runs in a fresh instance, which must answer the same bytes.
func FuzzDiff(f *testing.F) {
	// Every process loads the builds before fuzzing starts: the first builds the guest and
	// fills the compilation cache, which its fuzz workers then find (and -fuzztime counts
	// fuzzing only).
	d := loadDiff(f)
	for _, s := range diffSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d.check(t, data)
	})
}

// diffCrossCheckEvery: every n-th input of a session (the first included) also runs on a
// runner that replayed the setup (a fresh driver, a freshly instantiated module), to check
// that a cloned driver or a restored instance is the session it was.
const diffCrossCheckEvery = 256

// knownDifferencesPath lists the intended differences between releases and this build.
const knownDifferencesPath = "testdata/known_differences.txt"

// diffSeeds: FuzzDecode's seeds (protocol/SPEC.md's examples, a version-1 stream, malformed input of
// every class) and committed corpus, and every message of FuzzSession's seeds and committed
// corpus (version 2), each once.
func diffSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	seen := map[string]bool{}
	add := func(b []byte) {
		if !seen[string(b)] {
			seen[string(b)] = true
			out = append(out, b)
		}
	}
	addSession := func(input []byte) {
		_, msgs := splitSessionInput(input)
		for _, m := range msgs {
			add(m)
		}
	}
	for _, s := range seeds(tb) {
		add(s.data)
	}
	for _, s := range sessionSeeds(tb) {
		if !s.testOnly {
			addSession(s.data)
		}
	}
	for _, b := range corpusInputs(tb, "FuzzDecode") {
		add(b)
	}
	for _, b := range corpusInputs(tb, "FuzzSession") {
		addSession(b)
	}
	return out
}

// corpusInputs reads the committed corpus of a target whose one argument is a []byte.
func corpusInputs(tb testing.TB, target string) [][]byte {
	tb.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" {
			tb.Fatalf("%s/%s: not a corpus file of one value", dir, e.Name())
		}
		lit, ok := strings.CutPrefix(lines[1], "[]byte(")
		lit, ok2 := strings.CutSuffix(lit, ")")
		v, err := strconv.Unquote(lit)
		if !ok || !ok2 || err != nil {
			tb.Fatalf("%s/%s: not a []byte value: %q", dir, e.Name(), lines[1])
		}
		out = append(out, []byte(v))
	}
	return out
}

// ---- builds ----

// runner runs one batch of commands and returns the output batch (its own copy).
type runner interface {
	run(batch []byte) ([]byte, error)
}

type nativeRunner struct{ d abi.Driver }

func (n *nativeRunner) run(batch []byte) ([]byte, error) { return bytes.Clone(n.d.Step(batch)), nil }

// diffBuild is one build of the core.
type diffBuild struct {
	name       string
	release    *conformance.Release // nil: this commit's core
	mod        *wasmModule          // nil: native
	minV, maxV uint64               // the versions it implements, from its STATUS
	decoder    runner               // reused for every DECODE (stateless)
	sessions   map[uint64]*diffSession
}

// diffSession is a build's session at one version, established by the setup script.
type diffSession struct {
	b     *diffBuild
	v     uint64
	setup *recording
	in    *wasmInstance // wasm: the established instance, restored before each input
	snap  *snapshot
	nat   *abi.Driver // native: the established driver, cloned for each input
	fresh bool        // in has run nothing since it was saved
	runs  int
}

type diffState struct {
	native, wasm *diffBuild
	releases     []*diffBuild
	known        []knownDiff
	releaseEvery uint64 // 1 of releaseEvery inputs also goes to the releases (releaseSampled)
}

// defaultReleaseEvery is releaseSampled's default while fuzzing: the frozen releases
// together cost several times the current part per input and cannot get faster (their ABI
// is frozen), so they get one input in 8 and most of the fuzzing goes to the current
// builds (BENCHMARKS.md §8 has the cost of each part).
const defaultReleaseEvery = 8

var (
	diffOnce   sync.Once
	diffLoaded *diffState
	diffErr    error
)

func loadDiff(tb testing.TB) *diffState {
	tb.Helper()
	diffOnce.Do(func() { diffLoaded, diffErr = newDiffState() })
	if diffErr != nil {
		tb.Fatal(diffErr)
	}
	return diffLoaded
}

// newDiffState loads every build (the modules compile in parallel) and establishes their
// sessions.
func newDiffState() (*diffState, error) {
	corePath, err := currentCoreWasm()
	if err != nil {
		return nil, err
	}
	rels, err := conformance.ReadReleases("../conformance/RELEASES.md")
	if err != nil {
		return nil, err
	}
	if len(rels) == 0 {
		return nil, errors.New("conformance/RELEASES.md lists no release")
	}
	known, err := loadKnownDifferences(knownDifferencesPath, rels)
	if err != nil {
		return nil, err
	}
	d := &diffState{known: known, native: &diffBuild{name: "native", decoder: &nativeRunner{}}, releaseEvery: 1}
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		d.releaseEvery = defaultReleaseEvery
	}
	if v := os.Getenv("PLAIT_FUZZDIFF_RELEASE_EVERY"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("PLAIT_FUZZDIFF_RELEASE_EVERY=%q: want a positive integer", v)
		}
		d.releaseEvery = n
	}
	d.wasm = &diffBuild{name: "wasm"}
	paths := map[*diffBuild]string{d.wasm: corePath}
	for i := range rels {
		b := &diffBuild{name: rels[i].Name, release: &rels[i]}
		d.releases = append(d.releases, b)
		paths[b] = "../conformance/" + rels[i].Path()
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for b, p := range paths {
		wg.Go(func() {
			wasm, err := os.ReadFile(p)
			if sum := sha256.Sum256(wasm); err == nil && b.release != nil && hex.EncodeToString(sum[:]) != b.release.SHA256 {
				err = fmt.Errorf("sha256 %x, conformance/RELEASES.md records %s", sum, b.release.SHA256)
			}
			if err == nil {
				b.mod, err = loadWasm(context.Background(), b.name, wasm)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("build %s (%s): %w", b.name, p, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, b := range d.all() {
		if err := b.init(); err != nil {
			return nil, err
		}
	}
	if d.wasm.mod.abiVersion != abi.Version || d.wasm.minV != d.native.minV || d.wasm.maxV != d.native.maxV {
		return nil, fmt.Errorf("the wasm build: ABI %d, versions %d..%d; native: ABI %d, versions %d..%d",
			d.wasm.mod.abiVersion, d.wasm.minV, d.wasm.maxV, abi.Version, d.native.minV, d.native.maxV)
	}
	// Sessions: the current build at its newest version and at each release's; each
	// release at its newest (which this build must still speak).
	versions := []uint64{d.native.maxV}
	for _, r := range d.releases {
		v := r.maxV
		if v < d.native.minV || v > d.native.maxV {
			return nil, fmt.Errorf("release %s's newest version %d is not one this build (%d..%d) speaks", r.name, v, d.native.minV, d.native.maxV)
		}
		if err := r.establish(v); err != nil {
			return nil, err
		}
		versions = append(versions, v)
	}
	slices.Sort(versions)
	for _, v := range slices.Compact(versions) {
		if err := d.native.establish(v); err != nil {
			return nil, err
		}
		if err := d.wasm.establish(v); err != nil {
			return nil, err
		}
		n, w := d.native.sessions[v].setup, d.wasm.sessions[v].setup
		for i := range max(len(n.outs), len(w.outs)) {
			if !bytes.Equal(at(n.batches, i), at(w.batches, i)) || !bytes.Equal(at(n.outs, i), at(w.outs, i)) {
				return nil, fmt.Errorf("version %d setup, batch %d: native and wasm differ:\nnative:\n%s\nwasm:\n%s",
					v, i, describe(at(n.outs, i)), describe(at(w.outs, i)))
			}
		}
	}
	return d, nil
}

func at(bs [][]byte, i int) []byte {
	if i < len(bs) {
		return bs[i]
	}
	return nil
}

func (d *diffState) all() []*diffBuild { return append([]*diffBuild{d.native, d.wasm}, d.releases...) }

// init starts the build's DECODE runner and reads its version range and ABI version.
func (b *diffBuild) init() error {
	b.sessions = map[uint64]*diffSession{}
	if b.mod != nil {
		in, err := b.mod.instantiate()
		if err != nil {
			return err
		}
		b.decoder = in
		if b.release != nil && b.mod.abiVersion != b.release.ABI {
			return fmt.Errorf("release %s: abi_version %d, conformance/RELEASES.md says %d", b.name, b.mod.abiVersion, b.release.ABI)
		}
	}
	// The advertised range, from a configured session's STATUS.
	var batch abi.Batch
	if err := batch.Configure(sessionConfig(1, b.compact())); err != nil {
		return err
	}
	r, err := b.newRunner()
	if err != nil {
		return err
	}
	out, err := r.run(batch.Bytes())
	if err != nil {
		return err
	}
	st, err := statusOf(out)
	if err != nil {
		return fmt.Errorf("build %s: %w", b.name, err)
	}
	b.minV, b.maxV = st.MinVersion, st.MaxVersion
	if in, ok := r.(*wasmInstance); ok {
		in.close()
	}
	if b.release != nil && (b.minV != b.release.MinProto || b.maxV != b.release.MaxProto) {
		return fmt.Errorf("release %s advertises versions %d..%d, conformance/RELEASES.md says %d..%d", b.name, b.minV, b.maxV, b.release.MinProto, b.release.MaxProto)
	}
	return nil
}

// implements reports whether the build implements frame type t: this build's registry
// knows it and, for a release, it belongs to every version or to one of the release's.
func (b *diffBuild) implements(t wire.Type) bool {
	if !wire.Known(t) {
		return false
	}
	v := wire.Version(t)
	return b.release == nil || v == 0 || (v >= b.minV && v <= b.maxV)
}

// compact: the build answers in ABI 4's compact records, which cost less to write and
// read: this commit's builds and every release of ABI 4 on (0.3); an older release would
// ignore the key.
func (b *diffBuild) compact() bool { return b.release == nil || b.release.ABI >= 4 }

// newRunner returns a fresh runner: a new driver, or a new instance.
func (b *diffBuild) newRunner() (runner, error) {
	if b.mod == nil {
		return &nativeRunner{}, nil
	}
	return b.mod.instantiate()
}

// establish runs the setup of version v on a fresh runner of the build and keeps it (a WASM
// instance, saved) with the batches that got it there.
func (b *diffBuild) establish(v uint64) error {
	r, err := b.newRunner()
	if err != nil {
		return err
	}
	rec, err := diffSetup(r, v, b.compact())
	if err != nil {
		return fmt.Errorf("build %s, version %d: %w", b.name, v, err)
	}
	s := &diffSession{b: b, v: v, setup: rec}
	switch r := r.(type) {
	case *wasmInstance:
		s.in, s.snap, s.fresh = r, r.save(), true
	case *nativeRunner:
		s.nat = &r.d
	}
	b.sessions[v] = s
	return nil
}

// replay runs the recorded setup on a fresh runner, which must answer the recorded bytes.
func (s *diffSession) replay() (runner, error) {
	r, err := s.b.newRunner()
	if err != nil {
		return nil, err
	}
	for i, batch := range s.setup.batches {
		out, err := r.run(batch)
		if err == nil && !bytes.Equal(out, s.setup.outs[i]) {
			err = fmt.Errorf("build %s, version %d: replaying setup batch %d answers other bytes than recorded:\nnow:\n%s\nrecorded:\n%s",
				s.b.name, s.v, i, describe(out), describe(s.setup.outs[i]))
		}
		if err != nil {
			if in, ok := r.(*wasmInstance); ok {
				in.close()
			}
			return nil, err
		}
	}
	return r, nil
}

// receive runs the batch in the session as it was once established: natively on a clone of
// the established driver (abi.Driver.Clone), under WASM on the established instance restored
// to its saved state. Every diffCrossCheckEvery-th input of the session (the first included)
// also runs on a runner that replayed the setup, and both must answer the same bytes.
func (s *diffSession) receive(batch []byte) ([]byte, error) {
	s.runs++
	var out []byte
	if s.b.mod == nil {
		out = bytes.Clone(s.nat.Clone().Step(batch))
	} else {
		if s.in == nil || (!s.fresh && s.in.restore(s.snap) != nil) {
			// No instance, a dead one, or one whose memory grew: start again.
			if s.in != nil {
				s.in.close()
			}
			s.in = nil
			r, err := s.replay()
			if err != nil {
				return nil, err
			}
			s.in = r.(*wasmInstance)
			s.snap = s.in.save()
		}
		s.fresh = false
		var err error
		if out, err = s.in.run(batch); err != nil {
			return nil, err
		}
	}
	if (s.runs-1)%diffCrossCheckEvery == 0 {
		r, err := s.replay()
		if err != nil {
			return nil, err
		}
		if in, ok := r.(*wasmInstance); ok {
			defer in.close()
		}
		again, err := r.run(batch)
		if err != nil {
			return nil, fmt.Errorf("build %s, version %d: a replayed setup: %w", s.b.name, s.v, err)
		}
		if !bytes.Equal(out, again) {
			return nil, fmt.Errorf("build %s, version %d: the session as kept and one of a replayed setup answer differently:\nkept:\n%s\nreplayed:\n%s",
				s.b.name, s.v, describe(out), describe(again))
		}
	}
	return out, nil
}

// ---- the setup ----

// recording is what a build under test ran during a setup and what it answered.
type recording struct {
	batches, outs [][]byte
	now           time.Time // when the fuzzed message arrives
}

// sessionConfig is the build under test's CONFIGURE for the setup of version v: the same
// for every build, with the limits of FuzzDecode (version 1) or FuzzSession (version 2 on).
// compact asks for ABI 4's compact records (diffBuild.compact).
func sessionConfig(v uint64, compact bool) abi.ConfigMsg {
	l := limits
	if v >= 2 {
		l = sessLimits
	}
	return abi.ConfigMsg{Role: uint8(wire.RoleDialer), Name: "a", Origin: prototest.Origin(1), Secret: []byte("test-secret"),
		Limits: limitsMsg(l), Compact: compact}
}

func limitsMsg(l protocol.Limits) abi.LimitsMsg {
	return abi.LimitsMsg{MaxFrameBody: uint64(l.MaxFrameBody), MaxMessage: uint64(l.MaxMessage),
		MaxSendBuffer: uint64(l.MaxSendBuffer), MaxUnackedBytes: uint64(l.MaxUnackedBytes), MaxOrigins: uint64(l.MaxOrigins),
		HandshakeTimeout: uint64(l.HandshakeTimeout), PingInterval: uint64(l.PingInterval), LivenessTimeout: uint64(l.LivenessTimeout),
		MaxChannels: uint64(l.MaxChannels), MaxChannelBuffer: uint64(l.MaxChannelBuffer), MaxSessionBuffer: uint64(l.MaxSessionBuffer)}
}

// setupRun drives a build under test (through batches) against a native peer session.
type setupRun struct {
	r    runner
	peer *protocol.Session
	now  time.Time
	b    abi.Batch
	rec  *recording
	st   abi.StatusMsg
	err  error
}

// flush runs the pending batch; deliver: hand its messages to the peer. It reports whether
// the batch sent any.
func (s *setupRun) flush(deliver bool) bool {
	if s.err != nil || len(s.b.Bytes()) == 0 {
		return false
	}
	batch := bytes.Clone(s.b.Bytes())
	s.b.Reset()
	out, err := s.r.run(batch)
	if err != nil {
		s.err = err
		return false
	}
	s.rec.batches = append(s.rec.batches, batch)
	s.rec.outs = append(s.rec.outs, out)
	recs, err := abi.Split(out)
	if err != nil {
		s.err = err
		return false
	}
	sent := false
	for _, rec := range recs {
		switch rec.Kind.Base() {
		case abi.KindResult:
			m, err := abi.ParseResult(rec)
			if err != nil {
				s.err = err
				return false
			}
			if m.Err != nil {
				s.err = fmt.Errorf("setup command 0x%02x failed: %v", m.Op, m.Err.Wire())
				return false
			}
		case abi.KindMessage:
			sent = true
			if deliver && s.peer.State() != protocol.StateClosed {
				if err := s.peer.Receive(s.now, bytes.Clone(rec.Payload)); err != nil {
					s.err = err
					return false
				}
			}
		case abi.KindStatus:
			if s.st, err = abi.ParseStatus(rec); err != nil {
				s.err = err
				return false
			}
		}
	}
	return sent
}

// pump moves messages both ways until both sides are quiet.
func (s *setupRun) pump() {
	for range 50 {
		if s.err != nil {
			return
		}
		rd := s.peer.Ready()
		for _, m := range rd.Messages {
			s.b.Receive(s.now, m)
			s.peer.Release(m)
		}
		moved := s.flush(true) || len(rd.Messages) > 0
		if !moved && !s.peer.HasReady() {
			return
		}
	}
	s.err = errors.New("setup: no quiescence")
}

// onPeer runs commands on the peer, then pumps.
func (s *setupRun) onPeer(name string, errs ...error) {
	if err := errors.Join(errs...); err != nil && s.err == nil {
		s.err = fmt.Errorf("setup: peer: %s: %w", name, err)
	}
	s.pump()
}

// onSelf runs the commands added to the batch, then pumps; a batch that cannot be built
// fails the setup.
func (s *setupRun) onSelf(name string, errs ...error) {
	if err := errors.Join(errs...); err != nil && s.err == nil {
		s.err = fmt.Errorf("setup: %s: %w", name, err)
	}
	s.flush(true)
	s.pump()
}

// diffSetup establishes the build under test (r, a dialer) with a native peer at version
// v, and leaves it as FuzzDecode's setup (version 1) or FuzzSession's (version 2 and up)
// leaves its session under test: with data flowing both ways and a PING outstanding. It
// returns the batches r ran and their answers.
func diffSetup(r runner, v uint64, compact bool) (*recording, error) {
	pc := prototest.Config(wire.RoleListener, "b", 2)
	pc.MaxVersion = v
	cfg := sessionConfig(v, compact)
	if v >= 2 {
		pc.Limits = sessLimits
	} else {
		pc.Limits = limits
	}
	peer, err := protocol.New(pc)
	if err != nil {
		return nil, err
	}
	s := &setupRun{r: r, peer: peer, now: prototest.Epoch, rec: &recording{}}
	if err := peer.Start(s.now, prototest.Nonce(2)); err != nil {
		return nil, err
	}
	s.onSelf("configure and start", s.b.Configure(cfg), func() error { s.b.Start(s.now, prototest.Nonce(1)); return nil }())
	if v == 1 {
		// FuzzDecode's establish: the peer subscribes from subscribeFrom, the session
		// under test from 0 and offers the entries of origin 9 after naming it.
		s.onPeer("subscribe", peer.V1().Subscribe(subscribeFrom, nil))
		serr := s.b.Subscribe(abi.SubscribeMsg{From: 0})
		s.b.Name(prototest.Origin(9), "nine")
		for i, e := range offered {
			s.b.Offer(uint64(subscribeFrom+1+i), e.Raw)
		}
		s.onSelf("subscribe, name and offer", serr)
		s.now = s.now.Add(limits.PingInterval)
	} else {
		// FuzzSession's recordSessionSetup.
		last := func(c []prototest.Entry, o wire.OriginID) wire.Head {
			return wire.Head{Origin: o, Seq: uint64(len(c)), HLC: hlcOf(uint64(len(c)))}
		}
		hp, hr, hs := last(sessChainP, pOrigin), last(sessChainR, rOrigin), last(sessChainS, sOrigin)
		s.onPeer("name and advertise", peer.SetOriginName(pOrigin, "b"), peer.SetOriginName(rOrigin, "nine"),
			peer.V2().AdvertiseHeads([]wire.Head{hp, hr}))
		s.b.Name(sOrigin, "a")
		s.onSelf("name and advertise", s.b.AdvertiseHeads([]wire.Head{hs}))
		s.onSelf("subscribe", s.b.SubscribeOrigins([]abi.CursorMsg{{Origin: pOrigin}, {Origin: rOrigin}}))
		s.onPeer("subscribe", peer.V2().Subscribe([]vector.Entry{{Origin: sOrigin}}))
		s.onPeer("send", peer.V2().Send(sessChainP[0].Raw), peer.V2().Send(sessChainP[1].Raw), peer.V2().Send(sessChainR[0].Raw))
		for _, e := range sessChainS[:3] {
			s.b.Send(e.Raw)
		}
		s.onSelf("send")
		s.b.AckOrigin(pOrigin, 1)
		s.onSelf("ack")
		s.onPeer("ack", peer.V2().Ack(sOrigin, 1))
		s.now = sessNow
	}
	// The PING goes out and stays outstanding: its message is not delivered.
	s.b.Tick(s.now)
	s.flush(false)
	if s.err != nil {
		return nil, s.err
	}
	if s.st.State != uint8(protocol.StateEstablished) || s.st.Version != v || s.st.Err != nil || peer.State() != protocol.StateEstablished {
		return nil, fmt.Errorf("setup: state %d at version %d (err %v), want established at %d; the peer: %v, %v",
			s.st.State, s.st.Version, s.st.Err.Wire(), v, peer.State(), peer.Err())
	}
	s.rec.now = s.now
	return s.rec, nil
}

// ---- one input ----

// check runs one input: the part that compares this commit's builds, then each release's
// part when the input is one the releases get (releaseSampled).
func (d *diffState) check(t testing.TB, data []byte) {
	in := d.checkCurrent(t, data)
	if !d.releaseSampled(data) {
		return
	}
	for _, r := range d.releases {
		d.checkRelease(t, r, in)
	}
}

// diffInput is one input's answers from this commit's builds, kept for the releases'
// parts: the native DECODE outcome and the native RECEIVE batch per version.
type diffInput struct {
	data     []byte
	decode   outcome
	sessions map[uint64][]byte
}

// checkCurrent runs the input's DECODE and its RECEIVE at this build's newest version on
// native and wasm, which must answer identical bytes.
func (d *diffState) checkCurrent(t testing.TB, data []byte) *diffInput {
	var batch abi.Batch
	batch.Decode(data)
	outs := map[*diffBuild][]byte{}
	for _, b := range []*diffBuild{d.native, d.wasm} {
		outs[b] = d.decode(t, b, batch.Bytes())
	}
	if !bytes.Equal(outs[d.native], outs[d.wasm]) {
		t.Fatalf("DECODE: native and wasm answer different batches:\nnative:\n%s\nwasm:\n%s", describe(outs[d.native]), describe(outs[d.wasm]))
	}
	cur, err := decodeOutcome(d.native, outs[d.native], data)
	if err != nil {
		t.Fatalf("DECODE on native: %v", err)
	}
	in := &diffInput{data: data, decode: cur, sessions: map[uint64][]byte{}}
	d.currentSession(t, in, d.native.maxV)
	return in
}

// decode runs a DECODE batch on b's decoder.
func (d *diffState) decode(t testing.TB, b *diffBuild, batch []byte) []byte {
	out, err := b.decoder.run(batch)
	if err != nil {
		if in, ok := b.decoder.(*wasmInstance); ok { // the next input gets a new instance
			if fresh, ierr := in.m.instantiate(); ierr == nil {
				b.decoder = fresh
			}
		}
		t.Fatalf("DECODE on %s: %v", b.name, err)
	}
	return out
}

// currentSession runs the input's RECEIVE at version v on native and wasm (once per input
// and version), which must answer identical bytes, and returns native's.
func (d *diffState) currentSession(t testing.TB, in *diffInput, v uint64) []byte {
	if out, ok := in.sessions[v]; ok {
		return out
	}
	ns := d.native.sessions[v]
	var batch abi.Batch
	batch.Receive(ns.setup.now, in.data)
	nout, err := ns.receive(batch.Bytes())
	if err != nil {
		t.Fatalf("RECEIVE on native at version %d: %v", v, err)
	}
	wout, err := d.wasm.sessions[v].receive(batch.Bytes())
	if err != nil {
		t.Fatalf("RECEIVE on wasm at version %d: %v", v, err)
	}
	if !bytes.Equal(nout, wout) {
		t.Fatalf("RECEIVE at version %d: native and wasm answer different batches:\nnative:\n%s\nwasm:\n%s", v, describe(nout), describe(wout))
	}
	in.sessions[v] = nout
	return nout
}

// checkRelease runs the input's DECODE and its RECEIVE at the release's newest version on
// the release, and compares their outcomes with this build's (native and wasm run that
// version's RECEIVE too, if the current part did not).
func (d *diffState) checkRelease(t testing.TB, r *diffBuild, in *diffInput) {
	var batch abi.Batch
	batch.Decode(in.data)
	rel, err := decodeOutcome(r, d.decode(t, r, batch.Bytes()), in.data)
	if err != nil {
		t.Fatalf("DECODE on %s: %v", r.name, err)
	}
	if diffShared(r, in.data, rel, in.decode) && !rel.same(in.decode) {
		d.difference(t, r, "decode", rel, in.decode, in.data)
	}
	s := r.sessions[r.maxV]
	batch.Reset()
	batch.Receive(s.setup.now, in.data)
	out, err := s.receive(batch.Bytes())
	if err != nil {
		t.Fatalf("RECEIVE on %s at version %d: %v", r.name, s.v, err)
	}
	if rel, err = sessionOutcome(out, in.data); err != nil {
		t.Fatalf("RECEIVE on %s: %v", r.name, err)
	}
	cur, err := sessionOutcome(d.currentSession(t, in, s.v), in.data)
	if err != nil {
		t.Fatalf("RECEIVE on native: %v", err)
	}
	if !rel.same(cur) {
		d.difference(t, r, "session", rel, cur, in.data)
	}
}

// releaseSampled reports whether the input also goes to the frozen releases. Replaying the
// corpus (go test) gives every input to them; while fuzzing, a frozen release's part
// costs 1.5 to 2 times the current part's (a release answers CBOR records, encoded by
// reflection inside the guest, and cannot get faster), so only the inputs whose FNV-1a hash
// is 0 modulo releaseEvery (PLAIT_FUZZDIFF_RELEASE_EVERY, default defaultReleaseEvery) get
// them: the same inputs in every run, a deterministic sample the fuzzer's mutations spread
// over. PLAIT_FUZZDIFF_RELEASE_EVERY=1 gives every input to the releases.
func (d *diffState) releaseSampled(data []byte) bool {
	if d.releaseEvery <= 1 {
		return true
	}
	h := fnv.New64a()
	h.Write(data)
	return h.Sum64()%d.releaseEvery == 0
}

// difference fails the input unless a known difference matches.
func (d *diffState) difference(t testing.TB, r *diffBuild, what string, rel, cur outcome, data []byte) {
	t.Helper()
	for _, k := range d.known {
		if k.matches(r.name, what, rel, cur) {
			return
		}
	}
	t.Errorf("%s: release %s %s, this build %s; not in %s (input %d bytes: %x)",
		what, r.name, rel.detail(), cur.detail(), knownDifferencesPath, len(data), data[:min(len(data), 256)])
}

// outcome is what a build made of an input: accepted (or still established), or the error.
type outcome struct {
	ok     bool
	byPeer bool // the session was closed by the peer's CLOSE in the input
	code   wire.Code
	class  wire.Class
	offset int64 // of the failing frame's header; -1 when the error is not about a frame
	frame  int   // the type of the frame at offset, from the input; -1 when none
}

func (o outcome) String() string {
	if o.ok {
		return "ok"
	}
	s := string(o.code) + "/" + string(o.class)
	if o.byPeer {
		s = "peer:" + s
	}
	return s
}

func (o outcome) detail() string {
	if o.ok || o.offset < 0 {
		return o.String()
	}
	return fmt.Sprintf("%s at offset %d (frame type 0x%02x)", o, o.offset, o.frame)
}

func (o outcome) same(p outcome) bool {
	return o.ok == p.ok && (o.ok || (o.code == p.code && o.class == p.class && o.byPeer == p.byPeer && o.offset == p.offset))
}

func errOutcome(e *abi.ErrorMsg, data []byte) outcome {
	o := outcome{code: wire.Code(e.Code), class: wire.Class(e.Class), offset: e.Offset, frame: -1}
	if e.Offset >= 0 && e.Offset < int64(len(data)) {
		o.frame = int(data[e.Offset])
	}
	return o
}

// decodeOutcome reads a DECODE batch's answer: RESULT, DECODED, STATUS. Each decoded
// frame's "known" flag must be what implements says of its type: diffShared relies on it.
func decodeOutcome(b *diffBuild, out, data []byte) (outcome, error) {
	recs, err := abi.Split(out)
	if err != nil {
		return outcome{}, err
	}
	if len(recs) != 3 || recs[0].Kind != abi.KindResult || recs[1].Kind != abi.KindDecoded || recs[2].Kind.Base() != abi.KindStatus {
		return outcome{}, fmt.Errorf("not a DECODE answer:\n%s", describe(out))
	}
	var dec abi.DecodedMsg
	res, err := abi.ParseResult(recs[0])
	if err := errors.Join(err, abi.Unmarshal(recs[1].Payload, &dec)); err != nil {
		return outcome{}, err
	}
	if res.Err != nil {
		return outcome{}, fmt.Errorf("DECODE failed: %v", res.Err.Wire())
	}
	for _, fr := range dec.Frames {
		if want := b.implements(wire.Type(fr.Type)); fr.Known != want {
			return outcome{}, fmt.Errorf("DECODED says frame type 0x%02x is known: %v, the registry and the build's versions say %v", fr.Type, fr.Known, want)
		}
	}
	if dec.Err == nil {
		return outcome{ok: true, offset: -1, frame: -1}, nil
	}
	return errOutcome(dec.Err, data), nil
}

// sessionOutcome reads a RECEIVE batch's answer: established, or closed and why.
func sessionOutcome(out, data []byte) (outcome, error) {
	recs, err := abi.Split(out)
	if err != nil {
		return outcome{}, err
	}
	var st abi.StatusMsg
	byPeer, closedEv := false, 0
	for i, rec := range recs {
		switch rec.Kind.Base() {
		case abi.KindResult:
			m, err := abi.ParseResult(rec)
			if err != nil {
				return outcome{}, err
			}
			if m.Err != nil {
				return outcome{}, fmt.Errorf("RECEIVE refused: %v", m.Err.Wire())
			}
		case abi.KindEvent:
			e, err := abi.ParseEvent(rec)
			if err != nil {
				return outcome{}, err
			}
			if protocol.EventKind(e.Kind) == protocol.EventClosed {
				closedEv++
				byPeer = e.ByPeer
			}
		case abi.KindStatus:
			if i != len(recs)-1 {
				return outcome{}, fmt.Errorf("STATUS is not the last record:\n%s", describe(out))
			}
			if st, err = abi.ParseStatus(rec); err != nil {
				return outcome{}, err
			}
		}
	}
	switch protocol.State(st.State) {
	case protocol.StateEstablished:
		if st.Err != nil || closedEv != 0 {
			return outcome{}, fmt.Errorf("established with an error or a closed event:\n%s", describe(out))
		}
		return outcome{ok: true, offset: -1, frame: -1}, nil
	case protocol.StateClosed:
		if st.Err == nil || closedEv != 1 {
			return outcome{}, fmt.Errorf("closed with no error, or not one closed event:\n%s", describe(out))
		}
		o := errOutcome(st.Err, data)
		o.byPeer = byPeer
		return o, nil
	}
	return outcome{}, fmt.Errorf("state %d after RECEIVE on an established session:\n%s", st.State, describe(out))
}

// diffShared reports whether a release and this build implement the same frame types among
// those of the input's frames that either build reached: the frames whose header starts at
// or before the later of the two places they stopped (a frame's error, or the end). A
// release implements the types of this build's registry whose protocol version is in its
// range, and those of every version.
func diffShared(r *diffBuild, data []byte, rel, cur outcome) bool {
	stop := func(o outcome) int64 {
		switch {
		case o.ok:
			return int64(len(data)) - 1
		case o.offset < 0:
			return -1
		}
		return o.offset
	}
	last := max(stop(rel), stop(cur))
	for off := int64(0); off <= last && off < int64(len(data)); {
		if t := wire.Type(data[off]); r.implements(t) != wire.Known(t) {
			return false
		}
		if int64(len(data))-off < wire.HeaderSize {
			break
		}
		n := int64(data[off+6])<<24 | int64(data[off+7])<<16 | int64(data[off+8])<<8 | int64(data[off+9])
		off += wire.HeaderSize + n
	}
	return true
}

// ---- known differences ----

// knownDiff is one line of testdata/known_differences.txt.
type knownDiff struct {
	line     int
	release  string // a release's name
	what     string // decode or session
	rel, cur string // path.Match patterns on the outcomes' String
	frameLo  int    // the release's error names a frame of a type in [frameLo, frameHi];
	frameHi  int    // -1, -1: any
	reason   string
}

func (k knownDiff) matches(release, what string, rel, cur outcome) bool {
	if k.release != release || k.what != what {
		return false
	}
	if ok, _ := path.Match(k.rel, rel.String()); !ok {
		return false
	}
	if ok, _ := path.Match(k.cur, cur.String()); !ok {
		return false
	}
	if !rel.ok && !cur.ok && rel.offset != cur.offset {
		return false // a known difference is another verdict on the same frame
	}
	frame := rel.frame
	if rel.ok {
		frame = cur.frame // what this build refuses where the release takes it
	}
	return k.frameLo < 0 || (frame >= k.frameLo && frame <= k.frameHi)
}

// loadKnownDifferences reads the intended differences between releases and this build.
// One per line; blank lines and lines starting with # are ignored:
//
//	<release> <decode|session> <release's outcome> <this build's outcome> [frame=<t>[-<t>]] -- <reason>
//
// An outcome is "ok" (decoded, or still established) or "<code>/<class>" of the error,
// prefixed "peer:" when the peer's CLOSE closed the session; a pattern may use path.Match's
// wildcards ("unknown-frame/*"). frame= restricts the entry to inputs where the release's
// error is at a frame of that type (hex, 0x..), or of a type in that range (where the
// release's outcome is ok, to inputs where this build's error is). The reason is
// required: why the difference is intended (a bug fixed after the freeze, a frame type
// added later, ...).
func loadKnownDifferences(file string, rels []conformance.Release) ([]knownDiff, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names := map[string]bool{}
	for _, r := range rels {
		names[r.Name] = true
	}
	var out []knownDiff
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(why string) error { return fmt.Errorf("%s:%d: %s: %q", file, n, why, line) }
		matcher, reason, ok := strings.Cut(line, " -- ")
		reason = strings.TrimSpace(reason)
		if !ok || reason == "" {
			return nil, bad("no reason (\" -- <reason>\")")
		}
		fs := strings.Fields(matcher)
		if len(fs) < 4 || len(fs) > 5 {
			return nil, bad("want <release> <decode|session> <release's outcome> <this build's outcome> [frame=...]")
		}
		k := knownDiff{line: n, release: fs[0], what: fs[1], rel: fs[2], cur: fs[3], frameLo: -1, frameHi: -1, reason: reason}
		if !names[k.release] {
			return nil, bad("no release " + k.release + " in conformance/RELEASES.md")
		}
		if k.what != "decode" && k.what != "session" {
			return nil, bad("the comparison is decode or session")
		}
		for _, p := range []string{k.rel, k.cur} {
			if _, err := path.Match(p, ""); err != nil {
				return nil, bad("bad pattern " + p)
			}
		}
		if len(fs) == 5 {
			spec, ok := strings.CutPrefix(fs[4], "frame=")
			if !ok {
				return nil, bad("the fifth field is frame=<type>[-<type>]")
			}
			lo, hi, isRange := strings.Cut(spec, "-")
			if !isRange {
				hi = lo
			}
			l, err1 := strconv.ParseUint(lo, 0, 8)
			h, err2 := strconv.ParseUint(hi, 0, 8)
			if err1 != nil || err2 != nil || l > h {
				return nil, bad("bad frame type range " + spec)
			}
			k.frameLo, k.frameHi = int(l), int(h)
		}
		out = append(out, k)
	}
	return out, sc.Err()
}

// ---- helpers ----

// statusOf returns the STATUS of an output batch.
func statusOf(out []byte) (abi.StatusMsg, error) {
	var st abi.StatusMsg
	recs, err := abi.Split(out)
	if err != nil {
		return st, err
	}
	if len(recs) == 0 || recs[len(recs)-1].Kind.Base() != abi.KindStatus {
		return st, fmt.Errorf("no STATUS last:\n%s", describe(out))
	}
	return abi.ParseStatus(recs[len(recs)-1])
}

// describe renders an output batch, one record a line, CBOR in diagnostic notation.
func describe(out []byte) string {
	recs, err := abi.Split(out)
	var sb strings.Builder
	for _, r := range recs {
		switch r.Kind {
		case abi.KindMessage:
			fmt.Fprintf(&sb, "  MESSAGE %x\n", r.Payload)
		case abi.KindResult, abi.KindEvent, abi.KindStatus, abi.KindDecoded:
			diag, derr := cbor.Diagnose(r.Payload)
			if derr != nil {
				diag = fmt.Sprintf("%x (%v)", r.Payload, derr)
			}
			name := map[abi.Kind]string{abi.KindResult: "RESULT", abi.KindEvent: "EVENT", abi.KindStatus: "STATUS", abi.KindDecoded: "DECODED"}[r.Kind]
			fmt.Fprintf(&sb, "  %s %s\n", name, diag)
		case abi.KindResultCompact, abi.KindEventCompact, abi.KindStatusCompact:
			var v any
			var perr error
			switch r.Kind {
			case abi.KindResultCompact:
				v, perr = abi.ParseResult(r)
			case abi.KindEventCompact:
				v, perr = abi.ParseEvent(r)
			default:
				v, perr = abi.ParseStatus(r)
			}
			name := map[abi.Kind]string{abi.KindResultCompact: "RESULT", abi.KindEventCompact: "EVENT", abi.KindStatusCompact: "STATUS"}[r.Kind]
			fmt.Fprintf(&sb, "  %s (compact) %+v (%v)\n", name, v, perr)
		default:
			fmt.Fprintf(&sb, "  kind 0x%02x %x\n", r.Kind, r.Payload)
		}
	}
	if err != nil {
		fmt.Fprintf(&sb, "  (%v)\n", err)
	}
	return sb.String()
}

// TestMain removes what this process built for FuzzDiff (a fuzzing run's workers inherit
// it through the environment and remove nothing).
func TestMain(m *testing.M) {
	code := m.Run()
	removeOwnedDirs()
	os.Exit(code)
}

// TestKnownDifferencesFormat: the matcher of testdata/known_differences.txt, on made-up
// lines: outcome patterns, the frame range, the same-offset rule, and rejected lines.
func TestKnownDifferencesFormat(t *testing.T) {
	rels := []conformance.Release{{Name: "0.1"}}
	file := filepath.Join(t.TempDir(), "known.txt")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("# comment\n\n0.1 session unknown-frame/protocol unexpected-frame/* frame=0x20-0x27 -- reason\n0.1 decode ok bad-cbor/protocol -- other\n")
	known, err := loadKnownDifferences(file, rels)
	if err != nil || len(known) != 2 {
		t.Fatalf("%d entries, %v", len(known), err)
	}
	fail := func(code wire.Code, offset int64, frame int) outcome {
		return outcome{code: code, class: wire.ClassProtocol, offset: offset, frame: frame}
	}
	ok := outcome{ok: true, offset: -1, frame: -1}
	for _, c := range []struct {
		release, what string
		rel, cur      outcome
		want          bool
	}{
		{"0.1", "session", fail(wire.CodeUnknownFrame, 10, 0x23), fail(wire.CodeUnexpectedFrame, 10, 0x23), true},
		{"0.1", "session", fail(wire.CodeUnknownFrame, 10, 0x28), fail(wire.CodeUnexpectedFrame, 10, 0x28), false}, // frame out of range
		{"0.1", "session", fail(wire.CodeUnknownFrame, 10, 0x23), fail(wire.CodeUnexpectedFrame, 0, 0x04), false},  // another frame
		{"0.1", "session", fail(wire.CodeUnknownFrame, 10, 0x23), ok, false},
		{"0.1", "decode", fail(wire.CodeUnknownFrame, 10, 0x23), fail(wire.CodeUnexpectedFrame, 10, 0x23), false},  // another comparison
		{"0.2", "session", fail(wire.CodeUnknownFrame, 10, 0x23), fail(wire.CodeUnexpectedFrame, 10, 0x23), false}, // another release
		{"0.1", "decode", ok, fail(wire.CodeBadCBOR, 3, 0x04), true},
		{"0.1", "decode", ok, outcome{byPeer: true, code: wire.CodeBadCBOR, class: wire.ClassProtocol, offset: -1, frame: -1}, false},
	} {
		got := false
		for _, k := range known {
			got = got || k.matches(c.release, c.what, c.rel, c.cur)
		}
		if got != c.want {
			t.Errorf("%s %s %s -> %s: matched %v, want %v", c.release, c.what, c.rel.detail(), c.cur.detail(), got, c.want)
		}
	}
	for _, bad := range []string{
		"0.1 session ok ok\n",                           // no reason
		"0.1 session ok -- reason\n",                    // too few fields
		"0.3 session ok ok -- reason\n",                 // no such release
		"0.1 handshake ok ok -- reason\n",               // no such comparison
		"0.1 session ok ok frame=0x30-0x20 -- reason\n", // empty range
		"0.1 session ok ok range=1 -- reason\n",         // unknown condition
		"0.1 session [ ok -- reason\n",                  // bad pattern
	} {
		write(bad)
		if _, err := loadKnownDifferences(file, rels); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// BenchmarkFuzzDiff is FuzzDiff's cost per input by part, over its seeds: "current" (DECODE
// and RECEIVE at the newest version on native and wasm: what every input gets), "release
// x.y" (one release's DECODE and RECEIVE at its newest version, with native's and wasm's
// RECEIVE at that version), and "all" (an input through every part, as the corpus replay
// runs it).
//
// Each part runs under the pprof label "part", so that a CPU profile splits the CPU time by
// part (go tool pprof -tags): on a shared machine steadier than wall time.
func BenchmarkFuzzDiff(b *testing.B) {
	d := loadDiff(b)
	seeds := diffSeeds(b)
	part := func(b *testing.B, name string, f func(b *testing.B)) {
		b.Run(name, func(b *testing.B) {
			pprof.Do(context.Background(), pprof.Labels("part", name), func(context.Context) { f(b) })
		})
	}
	part(b, "current", func(b *testing.B) {
		i := 0
		for b.Loop() {
			d.checkCurrent(b, seeds[i%len(seeds)])
			i++
		}
	})
	for _, r := range d.releases {
		part(b, "release "+r.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				b.StopTimer()
				in := d.checkCurrent(b, seeds[i%len(seeds)])
				b.StartTimer()
				d.checkRelease(b, r, in)
				i++
			}
		})
	}
	part(b, "all", func(b *testing.B) {
		i := 0
		for b.Loop() {
			in := d.checkCurrent(b, seeds[i%len(seeds)])
			for _, r := range d.releases {
				d.checkRelease(b, r, in)
			}
			i++
		}
	})
}
