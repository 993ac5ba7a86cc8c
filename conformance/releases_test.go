package conformance_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"

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

// TestReleasesHandshakeWithCurrent: each frozen module loads under wazero, reports its ABI
// version, and completes a handshake with the current native session at the highest
// version both implement.
func TestReleasesHandshakeWithCurrent(t *testing.T) {
	ctx := context.Background()
	curMin, curMax := uint64(1), uint64(0)
	for _, r := range releases(t) {
		t.Run(r.Name, func(t *testing.T) {
			b, err := os.ReadFile(r.Path())
			if err != nil {
				t.Fatal(err)
			}
			mod, err := host.Load(ctx, b, "")
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(ctx)
			if mod.ABIVersion() != r.ABI {
				t.Fatalf("abi_version %d, RELEASES.md says %d", mod.ABIVersion(), r.ABI)
			}
			in, err := mod.Instantiate(ctx)
			if err != nil {
				t.Fatal(err)
			}
			nat, err := protocol.New(prototest.Config(wire.RoleListener, "current", 2))
			if err != nil {
				t.Fatal(err)
			}
			curMin, curMax = nat.Advertised()
			now := prototest.Epoch
			var batch abi.Batch
			if err := batch.Configure(abi.ConfigMsg{Role: uint8(wire.RoleDialer), Name: "frozen", Origin: prototest.Origin(1), Secret: []byte("test-secret")}); err != nil {
				t.Fatal(err)
			}
			batch.Start(now, prototest.Nonce(1))
			if err := nat.Start(now, prototest.Nonce(2)); err != nil {
				t.Fatal(err)
			}
			var status abi.StatusMsg
			for round := 0; round < 10; round++ {
				for _, m := range nat.Ready().Messages {
					batch.Receive(now, m)
				}
				out, err := in.Step(ctx, batch.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				batch.Reset()
				recs, err := abi.Split(out)
				if err != nil {
					t.Fatal(err)
				}
				moved := false
				for _, rec := range recs {
					switch rec.Kind {
					case abi.KindMessage:
						moved = true
						if err := nat.Receive(now, bytes.Clone(rec.Payload)); err != nil {
							t.Fatal(err)
						}
					case abi.KindStatus:
						if err := abi.Unmarshal(rec.Payload, &status); err != nil {
							t.Fatal(err)
						}
					}
				}
				if !moved && !nat.HasReady() {
					break
				}
			}
			want := min(r.MaxProto, curMax)
			if want < max(r.MinProto, curMin) {
				t.Skipf("release %s (%d..%d) and the current build (%d..%d) share no version", r.Name, r.MinProto, r.MaxProto, curMin, curMax)
			}
			if status.Version != want || nat.Handshake().Version != want || !status.Connected {
				t.Fatalf("negotiated %d/%d, want %d; status %+v, native %v", status.Version, nat.Handshake().Version, want, status, nat.Err())
			}
		})
	}
}
