package conformance_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"plait/conformance"
	"plait/protocol"
	"plait/protocol/abi"
	"plait/protocol/prototest"
	"plait/protocol/wire"
	"plait/shells/wasm/host"
)

func releases(t *testing.T) []conformance.Release {
	t.Helper()
	rs, err := conformance.ReadReleases("RELEASES.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 {
		t.Fatal("RELEASES.md lists no release")
	}
	return rs
}

// TestReleaseHashes: every frozen module is committed and has the recorded SHA-256. The
// suite never rebuilds a release.
func TestReleaseHashes(t *testing.T) {
	for _, r := range releases(t) {
		b, err := os.ReadFile(r.Path())
		if err != nil {
			t.Fatalf("release %s: %v", r.Name, err)
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != r.SHA256 {
			t.Errorf("release %s: %s has sha256 %s, RELEASES.md records %s", r.Name, r.Path(), got, r.SHA256)
		}
	}
}

// TestReleaseCommitsReachable: the commit each release was built from is in main's
// history. Skipped in a shallow clone, which does not hold the history to check.
func TestReleaseCommitsReachable(t *testing.T) {
	out, err := exec.Command("git", "rev-parse", "--is-shallow-repository").Output()
	if err != nil {
		t.Skip("not a git checkout")
	}
	if strings.TrimSpace(string(out)) == "true" {
		t.Skip("shallow clone: the release commits' history is not here")
	}
	for _, r := range releases(t) {
		if err := exec.Command("git", "merge-base", "--is-ancestor", r.Commit, "HEAD").Run(); err != nil {
			t.Errorf("release %s: commit %s is not reachable from HEAD: %v", r.Name, r.Commit, err)
		}
	}
}

// frozenPeer is one instance of a frozen module, driven through its ABI, joined to a native
// session of this build.
type frozenPeer struct {
	t         *testing.T
	in        *host.Instance
	b         abi.Batch
	nat       *protocol.Session
	now       time.Time
	events    []abi.EventMsg
	results   []abi.ResultMsg
	status    abi.StatusMsg
	natEvents []protocol.Event
}

// loaded holds each frozen module compiled once for the test binary (compiling takes
// seconds); instances are per test.
var (
	loadedMu sync.Mutex
	loaded   = map[string]*host.Module{}
)

// loadRelease loads a frozen module (never rebuilt) and checks its ABI version.
func loadRelease(t *testing.T, r conformance.Release) *host.Module {
	t.Helper()
	loadedMu.Lock()
	defer loadedMu.Unlock()
	mod := loaded[r.Path()]
	if mod == nil {
		b, err := os.ReadFile(r.Path())
		if err != nil {
			t.Fatal(err)
		}
		if mod, err = loadCore(b); err != nil {
			t.Fatal(err)
		}
		loaded[r.Path()] = mod
	}
	if mod.ABIVersion() != r.ABI {
		t.Fatalf("abi_version %d, RELEASES.md says %d", mod.ABIVersion(), r.ABI)
	}
	return mod
}

// newFrozenPeer starts a frozen instance of the given role (origin 1, "frozen") and a native
// session of the other role configured by cfg.
func newFrozenPeer(t *testing.T, mod *host.Module, role wire.Role, cfg protocol.Config) *frozenPeer {
	t.Helper()
	in, err := mod.Instantiate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(context.Background()) })
	nat, err := protocol.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &frozenPeer{t: t, in: in, nat: nat, now: prototest.Epoch}
	if err := nat.Start(f.now, prototest.Nonce(2)); err != nil {
		t.Fatal(err)
	}
	if err := f.b.Configure(abi.ConfigMsg{Role: uint8(role), Name: "frozen", Origin: prototest.Origin(1), Secret: cfg.Secret}); err != nil {
		t.Fatal(err)
	}
	f.b.Start(f.now, prototest.Nonce(1))
	f.step()
	f.pump()
	return f
}

// step runs the pending batch on the frozen instance and hands its messages to the native
// session. A command that fails fails the test.
func (f *frozenPeer) step() (moved bool) {
	f.t.Helper()
	out, err := f.in.Step(context.Background(), f.b.Bytes())
	if err != nil {
		f.t.Fatal(err)
	}
	f.b.Reset()
	recs, err := abi.Split(out)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, rec := range recs {
		switch rec.Kind {
		case abi.KindResult:
			var m abi.ResultMsg
			if err := abi.Unmarshal(rec.Payload, &m); err != nil {
				f.t.Fatal(err)
			}
			if m.Err != nil {
				f.t.Fatalf("frozen command 0x%02x failed: %v", m.Op, m.Err.Wire())
			}
		case abi.KindMessage:
			moved = true
			if f.nat.State() == protocol.StateClosed {
				continue
			}
			if err := f.nat.Receive(f.now, bytes.Clone(rec.Payload)); err != nil {
				f.t.Fatal(err)
			}
		case abi.KindEvent:
			var m abi.EventMsg
			if err := abi.Unmarshal(rec.Payload, &m); err != nil {
				f.t.Fatal(err)
			}
			f.events = append(f.events, m)
		case abi.KindStatus:
			f.status = abi.StatusMsg{}
			if err := abi.Unmarshal(rec.Payload, &f.status); err != nil {
				f.t.Fatal(err)
			}
		}
	}
	return moved
}

// pump moves messages both ways until both sides are quiet.
func (f *frozenPeer) pump() {
	f.t.Helper()
	for round := 0; round < 20; round++ {
		rd := f.nat.Ready()
		f.natEvents = append(f.natEvents, rd.Events...)
		for _, m := range rd.Messages {
			f.b.Receive(f.now, m)
		}
		moved := len(rd.Messages) > 0
		if len(f.b.Bytes()) > 0 {
			moved = f.step() || moved
		}
		if !moved && !f.nat.HasReady() {
			return
		}
	}
	f.t.Fatal("no quiescence")
}

func (f *frozenPeer) count(kind protocol.EventKind) int {
	n := 0
	for _, e := range f.events {
		if protocol.EventKind(e.Kind) == kind {
			n++
		}
	}
	return n
}

// TestReleasesHandshakeWithCurrent: each frozen module loads under wazero, reports its ABI
// version, advertises its own range, and completes a handshake with the current native
// session, in either role, at the highest version both implement (release 0.1 and this
// build: version 1). A release that shares no version with this build breaks the promise
// that a build keeps speaking every version it ever released.
func TestReleasesHandshakeWithCurrent(t *testing.T) {
	for _, r := range releases(t) {
		t.Run(r.Name, func(t *testing.T) {
			mod := loadRelease(t, r)
			for _, role := range []wire.Role{wire.RoleDialer, wire.RoleListener} {
				t.Run("frozen "+role.String(), func(t *testing.T) {
					f := newFrozenPeer(t, mod, role, prototest.Config(1-role, "current", 2))
					curMin, curMax := f.nat.Advertised()
					if curMin != 1 || curMax != 4 {
						t.Fatalf("the current build advertises %d..%d, want 1..4", curMin, curMax)
					}
					want := min(r.MaxProto, curMax)
					if want < max(r.MinProto, curMin) {
						t.Fatalf("release %s (%d..%d) and the current build (%d..%d) share no version", r.Name, r.MinProto, r.MaxProto, curMin, curMax)
					}
					if r.Name == "0.1" && want != 1 {
						t.Fatalf("release 0.1 would negotiate %d", want)
					}
					st := f.status
					if st.MinVersion != r.MinProto || st.MaxVersion != r.MaxProto {
						t.Fatalf("the frozen module advertises %d..%d, RELEASES.md says %d..%d", st.MinVersion, st.MaxVersion, r.MinProto, r.MaxProto)
					}
					if st.Version != want || f.nat.Handshake().Version != want || !st.Connected || f.count(protocol.EventHandshake) != 1 {
						t.Fatalf("negotiated %d/%d, want %d; status %+v, native %v", st.Version, f.nat.Handshake().Version, want, st, f.nat.Err())
					}
					if h := st.Handshake; h == nil || h.PeerMin != curMin || h.PeerMax != curMax || h.PeerName != "current" || !h.Authenticated {
						t.Fatalf("the frozen module's handshake %+v", h)
					}
					if h := f.nat.Handshake(); h.PeerMin != r.MinProto || h.PeerMax != r.MaxProto || h.PeerName != "frozen" || h.PeerOrigin != prototest.Origin(1) {
						t.Fatalf("the native handshake %+v", h)
					}
				})
			}
		})
	}
}

// TestReleasesNegotiationRows: the negotiation rows of SPEC's "Handshake" hold for each
// frozen module as they did when it was released: against a native session configured to
// each range, it negotiates the highest common version, or both sides close with
// unsupported-version naming both ranges.
func TestReleasesNegotiationRows(t *testing.T) {
	for _, r := range releases(t) {
		t.Run(r.Name, func(t *testing.T) {
			mod := loadRelease(t, r)
			for _, nr := range []struct{ min, max uint64 }{{1, 1}, {1, 2}, {0, 0}, {2, 2}} {
				cfg := prototest.Config(wire.RoleListener, "current", 2)
				cfg.MinVersion, cfg.MaxVersion = nr.min, nr.max
				f := newFrozenPeer(t, mod, wire.RoleDialer, cfg)
				lo, hi := f.nat.Advertised()
				want := min(r.MaxProto, hi)
				if want >= max(r.MinProto, lo) {
					if f.status.Version != want || f.nat.Handshake().Version != want {
						t.Errorf("native %d..%d: negotiated %d/%d, want %d", lo, hi, f.status.Version, f.nat.Handshake().Version, want)
					}
					continue
				}
				frozenRange := strconv.FormatUint(r.MinProto, 10) + ".." + strconv.FormatUint(r.MaxProto, 10)
				nativeRange := strconv.FormatUint(lo, 10) + ".." + strconv.FormatUint(hi, 10)
				e, ne := f.status.Err.Wire(), f.nat.Err()
				if f.status.State != uint8(protocol.StateClosed) || e == nil || e.Code != wire.CodeUnsupportedVersion || e.Class != wire.ClassUnsupported ||
					!strings.Contains(e.Message, "local "+frozenRange+", peer "+nativeRange) {
					t.Errorf("native %s: the frozen module: state %d, err %+v", nativeRange, f.status.State, e)
				}
				if ne == nil || ne.Code != wire.CodeUnsupportedVersion || !strings.Contains(ne.Message, "local "+nativeRange+", peer "+frozenRange) {
					t.Errorf("native %s: the native session: %v", nativeRange, ne)
				}
				if f.count(protocol.EventHandshake) != 0 || f.nat.Handshake().Version != 0 {
					t.Errorf("native %s: a handshake was reported", nativeRange)
				}
			}
		})
	}
}

// TestReleasesStreamWithCurrent: a frozen module implementing version 1 still interoperates
// with the current build over version 1, in either role and either direction: SUBSCRIBE1,
// entries announced by ORIGIN, ACK1. The current side offers version 1 only, so a release
// that also speaks version 2 is held to version 1 here (the version matrix runs 2).
func TestReleasesStreamWithCurrent(t *testing.T) {
	for _, r := range releases(t) {
		if r.MinProto > 1 {
			continue
		}
		t.Run(r.Name, func(t *testing.T) {
			mod := loadRelease(t, r)
			for _, role := range []wire.Role{wire.RoleDialer, wire.RoleListener} {
				t.Run("frozen "+role.String(), func(t *testing.T) {
					f := newFrozenPeer(t, mod, role, prototest.ConfigV1(1-role, "current", 2))
					if f.status.Version != 1 {
						t.Fatalf("negotiated %d", f.status.Version)
					}
					// The frozen side subscribes; the current side streams two origins.
					if err := f.b.Subscribe(abi.SubscribeMsg{From: 0}); err != nil {
						t.Fatal(err)
					}
					f.step()
					f.pump()
					seven, eight := prototest.Origin(7), prototest.Origin(8)
					c7, c8 := prototest.Chain(seven, 3, 1, 50), prototest.Chain(eight, 2, 2, 20)
					for o, name := range map[wire.OriginID]string{seven: "seven", eight: "eight"} {
						if err := f.nat.SetOriginName(o, name); err != nil {
							t.Fatal(err)
						}
					}
					order := []prototest.Entry{c7[0], c8[0], c7[1], c7[2], c8[1]}
					for i, e := range order {
						if err := f.nat.V1().Offer(uint64(i+1), e.Raw); err != nil {
							t.Fatal(err)
						}
					}
					f.pump()
					var named []string
					var got []abi.EventMsg
					for _, e := range f.events {
						switch protocol.EventKind(e.Kind) {
						case protocol.EventOriginNamed:
							named = append(named, e.Name)
						case protocol.EventTxn:
							got = append(got, e)
						}
					}
					if len(named) != 2 || named[0] != "seven" || named[1] != "eight" || len(got) != len(order) {
						t.Fatalf("named %v, %d entries applied", named, len(got))
					}
					for i, e := range got {
						if e.Position != uint64(i+1) || !bytes.Equal(e.Txn, order[i].Raw) {
							t.Fatalf("entry %d: position %d", i, e.Position)
						}
					}
					if f.status.HeldBytes == 0 {
						t.Fatal("nothing held before the acknowledgement")
					}
					f.b.Ack(5)
					f.step()
					f.pump()
					var acked uint64
					for _, e := range f.natEvents {
						if e.Kind == protocol.EventAcked {
							acked = e.Position
						}
					}
					if acked != 5 || f.status.HeldBytes != 0 {
						t.Fatalf("acked %d, held %d", acked, f.status.HeldBytes)
					}

					// The other direction: the current side subscribes, the frozen side offers
					// its own origin.
					if err := f.nat.V1().Subscribe(0, nil); err != nil {
						t.Fatal(err)
					}
					f.pump()
					mine := prototest.Chain(prototest.Origin(1), 3, 1, 10)
					f.b.Name(prototest.Origin(1), "frozen")
					for i, e := range mine {
						f.b.Offer(uint64(i+1), e.Raw)
					}
					f.step()
					f.pump()
					var recv []protocol.Event
					var name string
					for _, e := range f.natEvents {
						switch e.Kind {
						case protocol.EventTxn:
							recv = append(recv, e)
						case protocol.EventOriginNamed:
							name = e.Name
						}
					}
					if len(recv) != 3 || name != "frozen" || recv[2].Position != 3 || recv[2].Txn.Seq != 3 {
						t.Fatalf("native received %d entries, origin named %q", len(recv), name)
					}
					if err := f.nat.V1().Ack(3); err != nil {
						t.Fatal(err)
					}
					f.pump()
					if f.count(protocol.EventAcked) != 1 || f.status.State != uint8(protocol.StateEstablished) ||
						f.nat.State() != protocol.StateEstablished || f.status.Stats.ProtocolErrors != 0 {
						t.Fatalf("status %+v, native %v", f.status, f.nat.Err())
					}
				})
			}
		})
	}
}
