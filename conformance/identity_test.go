package conformance_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"plait/conformance/sim"
	"plait/protocol/replica"
	"plait/shells/wasm/host"
)

var identitySeeds = flag.Int("identity.seeds", 3, "random simulator seeds TestSimIdentityNativeWasm runs both ways")

var (
	currentOnce sync.Once
	currentMod  *host.Module
	currentErr  error
)

// currentModule is this commit's core compiled to WASM with the release command, built
// once per test binary (or the module PLAIT_CORE_WASM names, from make wasm).
func currentModule(t *testing.T) *host.Module {
	t.Helper()
	currentOnce.Do(func() {
		path := os.Getenv("PLAIT_CORE_WASM")
		if path == "" {
			dir, err := os.MkdirTemp("", "plait-core-")
			if err != nil {
				currentErr = err
				return
			}
			defer os.RemoveAll(dir)
			path = filepath.Join(dir, "core.wasm")
			cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-buildmode=c-shared", "-o", path, "plait/shells/wasm/guest")
			cmd.Env = append(os.Environ(), "GOFLAGS=", "CGO_ENABLED=0", "GOOS=wasip1", "GOARCH=wasm")
			if out, err := cmd.CombinedOutput(); err != nil {
				currentErr = fmt.Errorf("building the guest: %v\n%s", err, out)
				return
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			currentErr = err
			return
		}
		currentMod, currentErr = loadCore(b)
	})
	if currentErr != nil {
		t.Fatal(currentErr)
	}
	return currentMod
}

// TestScenariosUnderWasm: every scenario file gives exactly its recorded output (the
// native core's) with every session in an instance of this commit's WASM core.
func TestScenariosUnderWasm(t *testing.T) { runScenarios(t, currentModule(t).NewSessionFunc(0)) }

// TestSimIdentityNativeWasm: the simulator's random runs give the same trace and the same
// report, line for line, whether every session runs natively or in an instance of this
// commit's WASM core (host.Session): the two builds of the core decide identically.
func TestSimIdentityNativeWasm(t *testing.T) {
	mod := currentModule(t)
	for seed := uint64(1); seed <= uint64(*identitySeeds); seed++ {
		var native, wasm []string
		repN := sim.Random(seed, sim.Options{Trace: func(l string) { native = append(native, l) }})
		repW := sim.Random(seed, sim.Options{Trace: func(l string) { wasm = append(wasm, l) }, Config: replica.Config{NewSession: mod.NewSessionFunc(0)}})
		if a, b := fmt.Sprint(repN), fmt.Sprint(repW); a != b {
			t.Errorf("seed %d: reports differ:\nnative %s\nwasm   %s", seed, a, b)
		}
		if a, b := strings.Join(native, "\n"), strings.Join(wasm, "\n"); a != b {
			for i := range min(len(native), len(wasm)) {
				if native[i] != wasm[i] {
					t.Errorf("seed %d: traces differ first at line %d:\nnative %s\nwasm   %s", seed, i+1, native[i], wasm[i])
					break
				}
			}
			if len(native) != len(wasm) {
				t.Errorf("seed %d: traces of %d (native) and %d (wasm) lines", seed, len(native), len(wasm))
			}
		}
		for _, f := range repW.Failures {
			t.Errorf("seed %d under wasm: %s", seed, f)
		}
		t.Logf("seed %d: %d trace lines, identical", seed, len(native))
	}
}

// loadCore compiles a core module for the suite: with the compilation cache of
// PLAIT_WAZERO_CACHE when set (make conformance keeps one under build/, so that only the
// first run compiles), and without wazero's termination checks, which double the time of
// every call into the Go guest (BENCHMARKS.md §7): a guest that hangs is stopped by go
// test's -timeout instead of the call's deadline.
func loadCore(wasm []byte) (*host.Module, error) {
	return host.Load(context.Background(), wasm, os.Getenv("PLAIT_WAZERO_CACHE"), host.WithoutCallDeadline())
}
