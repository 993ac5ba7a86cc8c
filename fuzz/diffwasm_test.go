package fuzz

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"plait/protocol/abi"
	"plait/shells/wasm/host"
)

// This file runs core modules (shells/wasm/ABI.md) for FuzzDiff. It does what
// shells/wasm/host does (compile once, an instance per session, alloc/step/read), and adds
// what a fuzzer needs and the host does not offer: an instance's whole state can be saved
// after the setup and put back before each input, so that an input costs a memory copy
// instead of an instantiation, which runs the Go runtime's initialisation and costs far
// more than the input itself (BENCHMARKS.md §7).
//
// The state of an instance is its linear memory, its globals (the module's table is never
// written by Go code) and what its WASI host holds for it: the clocks and the random source
// the Go runtime inside reads (the core reads neither), kept in a hostState that a restore
// resets too, so that a restored instance reads exactly what it read the first time.
// Globals are not exported by Go's linker, so the module is loaded with one change: its
// export section also exports each of its globals (exportGlobals). Nothing else of the
// module's bytes changes; in particular the frozen releases' code runs as committed.
// FuzzDiff checks a restored instance against a freshly instantiated one regularly
// (diffCrossCheckEvery).
//
// Calls into a Go module under wazero cost far more than the native core (BENCHMARKS.md §7
// and §8).

// Environment variables, read by every process of a fuzzing run (Go starts its fuzz workers
// with the coordinator's environment):
//
//	PLAIT_CORE_WASM     the current guest, already built (make wasm); unset: built once
//	                    by the first process that needs it, which passes it on to its
//	                    workers and removes it at exit
//	PLAIT_WAZERO_CACHE  wazero's compilation cache directory; unset: a temporary one per
//	                    run, likewise passed on and removed. scripts/fuzz.sh keeps one for
//	                    all its rounds, so that only the first round compiles the modules.
const (
	envCoreWasm    = "PLAIT_CORE_WASM"
	envWazeroCache = "PLAIT_WAZERO_CACHE"
)

// callTimeout bounds every call into a module: a guest that runs longer crashes the process
// (watchdog), which a fuzzing run reports with the input as a failure. wazero's own
// WithCloseOnContextDone would stop the call instead, but its checks at every function
// entry and loop make every call into a Go module several times slower.
const callTimeout = 10 * time.Second

var (
	watchOnce  sync.Once
	callStart  atomic.Int64 // Unix ns when the running call began; 0: none running
	callModule atomic.Pointer[string]
)

// watch marks the start of a call into a module; the returned func marks its end.
func watch(name *string) func() {
	watchOnce.Do(func() {
		go func() {
			for range time.Tick(time.Second) {
				if st := callStart.Load(); st != 0 && time.Since(time.Unix(0, st)) > callTimeout {
					panic(fmt.Sprintf("a call into %s has run for more than %v", *callModule.Load(), callTimeout))
				}
			}
		}()
	})
	callModule.Store(name)
	callStart.Store(time.Now().UnixNano())
	return func() { callStart.Store(0) }
}

var (
	ownedMu   sync.Mutex
	ownedDirs []string // temporary directories this process created, removed by TestMain
)

func ownDir(dir string) {
	ownedMu.Lock()
	defer ownedMu.Unlock()
	ownedDirs = append(ownedDirs, dir)
}

func removeOwnedDirs() {
	ownedMu.Lock()
	defer ownedMu.Unlock()
	for _, d := range ownedDirs {
		os.RemoveAll(d)
	}
	ownedDirs = nil
}

var (
	coreOnce sync.Once
	corePath string
	coreErr  error
)

// currentCoreWasm returns the path of this commit's guest module, building it with the
// release command (conformance/RELEASES.md) unless PLAIT_CORE_WASM names one. The first
// call also settles the compilation cache directory; both go into the environment, so that
// fuzz workers started later use them instead of building and compiling again.
func currentCoreWasm() (string, error) {
	coreOnce.Do(func() {
		if dir := os.Getenv(envWazeroCache); dir == "" {
			dir, err := os.MkdirTemp("", "plait-fuzzdiff-wazero-")
			if err != nil {
				coreErr = err
				return
			}
			ownDir(dir)
			os.Setenv(envWazeroCache, dir)
		}
		if corePath = os.Getenv(envCoreWasm); corePath != "" {
			return
		}
		dir, err := os.MkdirTemp("", "plait-fuzzdiff-core-")
		if err != nil {
			coreErr = err
			return
		}
		ownDir(dir)
		path := filepath.Join(dir, "core.wasm")
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-buildmode=c-shared", "-o", path, "plait/shells/wasm/guest")
		cmd.Env = append(os.Environ(), "GOFLAGS=", "CGO_ENABLED=0", "GOOS=wasip1", "GOARCH=wasm")
		if out, err := cmd.CombinedOutput(); err != nil {
			coreErr = fmt.Errorf("building the guest: %v\n%s", err, out)
			return
		}
		corePath = path
		os.Setenv(envCoreWasm, path)
	})
	return corePath, coreErr
}

// wasmModule is one compiled core module.
type wasmModule struct {
	name       string
	rt         wazero.Runtime
	compiled   wazero.CompiledModule
	globals    int // globals exported by exportGlobals
	abiVersion uint32
}

// globalName is the export name exportGlobals gives global i.
func globalName(i int) string { return "plait.fuzz.global." + strconv.Itoa(i) }

// exportGlobals returns the module with every global it defines also exported (as
// globalName(i), i counting the module's own globals), and how many it defines. The export
// section is the only one rewritten; every other section is copied byte for byte.
func exportGlobals(wasm []byte) ([]byte, int, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, 0, errors.New("not a WebAssembly module")
	}
	type section struct {
		id         byte
		start, end int // the whole section, header included
		body       int // where its content starts
	}
	var secs []section
	imported, defined := 0, 0
	for off := 8; off < len(wasm); {
		id := wasm[off]
		size, n := binary.Uvarint(wasm[off+1:])
		if n <= 0 || size > uint64(len(wasm)-off-1-n) {
			return nil, 0, fmt.Errorf("section at %d: bad size", off)
		}
		s := section{id: id, start: off, body: off + 1 + n, end: off + 1 + n + int(size)}
		secs = append(secs, s)
		switch id {
		case 2: // imports: count the imported globals, which come first in the index space
			var err error
			if imported, err = importedGlobals(wasm[s.body:s.end]); err != nil {
				return nil, 0, err
			}
		case 6: // globals
			c, n := binary.Uvarint(wasm[s.body:s.end])
			if n <= 0 {
				return nil, 0, errors.New("global section: bad count")
			}
			defined = int(c)
		}
		off = s.end
	}
	out := append([]byte(nil), wasm[:8]...)
	found := false
	for _, s := range secs {
		if s.id != 7 {
			out = append(out, wasm[s.start:s.end]...)
			continue
		}
		found = true
		content := wasm[s.body:s.end]
		c, n := binary.Uvarint(content)
		if n <= 0 {
			return nil, 0, errors.New("export section: bad count")
		}
		nc := binary.AppendUvarint(nil, c+uint64(defined))
		nc = append(nc, content[n:]...)
		for i := range defined {
			name := globalName(i)
			nc = binary.AppendUvarint(nc, uint64(len(name)))
			nc = append(nc, name...)
			nc = append(nc, 0x03) // global
			nc = binary.AppendUvarint(nc, uint64(imported+i))
		}
		out = append(out, 7)
		out = binary.AppendUvarint(out, uint64(len(nc)))
		out = append(out, nc...)
	}
	if !found {
		return nil, 0, errors.New("the module has no export section")
	}
	return out, defined, nil
}

// importedGlobals counts the global imports of an import section's content.
func importedGlobals(b []byte) (int, error) {
	bad := errors.New("import section: malformed")
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	skip := func(k int) bool {
		if k > len(b) {
			return false
		}
		b = b[k:]
		return true
	}
	limits := func() bool { // flags, min[, max]
		f, ok := next()
		if !ok {
			return false
		}
		if _, ok = next(); !ok {
			return false
		}
		if f&1 != 0 {
			_, ok = next()
		}
		return ok
	}
	count, ok := next()
	if !ok {
		return 0, bad
	}
	globals := 0
	for range count {
		for range 2 { // module and field names
			l, ok := next()
			if !ok || !skip(int(l)) {
				return 0, bad
			}
		}
		if len(b) == 0 {
			return 0, bad
		}
		kind := b[0]
		b = b[1:]
		switch kind {
		case 0: // function: type index
			ok = func() bool { _, ok := next(); return ok }()
		case 1: // table: reftype, limits
			ok = skip(1) && limits()
		case 2: // memory: limits
			ok = limits()
		case 3: // global: valtype, mutability
			ok = skip(2)
			globals++
		default:
			ok = false
		}
		if !ok {
			return 0, bad
		}
	}
	return globals, nil
}

// loadWasm compiles a core module with its globals exported, using the run's compilation
// cache.
func loadWasm(ctx context.Context, name string, wasm []byte) (*wasmModule, error) {
	rewritten, globals, err := exportGlobals(wasm)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cfg := wazero.NewRuntimeConfigCompiler()
	if dir := os.Getenv(envWazeroCache); dir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(dir)
		if err != nil {
			return nil, fmt.Errorf("compilation cache %s: %w", dir, err)
		}
		cfg = cfg.WithCompilationCache(cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if err := host.InstantiateImports(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	compiled, err := rt.CompileModule(ctx, rewritten)
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("%s: compiling: %w", name, err)
	}
	for _, fn := range []string{"abi_version", "alloc", "step", "_initialize"} {
		if _, ok := compiled.ExportedFunctions()[fn]; !ok {
			rt.Close(ctx)
			return nil, fmt.Errorf("%s: the module does not export %q: not a plait core", name, fn)
		}
	}
	m := &wasmModule{name: name, rt: rt, compiled: compiled, globals: globals}
	in, err := m.instantiate()
	if err != nil {
		rt.Close(ctx)
		return nil, err
	}
	defer in.close()
	res, err := in.mod.ExportedFunction("abi_version").Call(ctx)
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("%s: abi_version: %w", name, err)
	}
	m.abiVersion = api.DecodeU32(res[0])
	return m, nil
}

// wasmInstance is one instance of a module, running one session (or only DECODE).
type wasmInstance struct {
	m       *wasmModule
	mod     api.Module
	mem     api.Memory
	alloc   api.Function
	step    api.Function
	globals []api.MutableGlobal
	host    *hostState
	dead    error
}

// hostState is what the WASI host gives an instance beyond its memory: the clocks the Go
// runtime inside reads (the core reads none) and the random bytes it asks for. wazero's
// defaults (clocks that advance 1 ms a reading, a fixed random stream) are kept, but held
// here so that restoring an instance also restores them: a restored instance then reads
// exactly what it read the first time.
type hostState struct {
	nano, wall atomic.Int64
	rand       atomic.Uint64
}

func newHostState() *hostState {
	h := &hostState{}
	h.nano.Store(0)
	h.wall.Store(1640995200000 * int64(time.Millisecond)) // wazero's fake epoch, 2022-01-01
	h.rand.Store(0x9e3779b97f4a7c15)
	return h
}

func (h *hostState) Read(p []byte) (int, error) { // splitmix64
	for i := 0; i < len(p); i += 8 {
		z := h.rand.Add(0x9e3779b97f4a7c15)
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], z)
		copy(p[i:], b[:])
	}
	return len(p), nil
}

func (h *hostState) config() wazero.ModuleConfig {
	ms := int64(time.Millisecond)
	return wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize").
		WithNanotime(func() int64 { return h.nano.Add(ms) - ms }, 1).
		WithWalltime(func() (int64, int32) { w := h.wall.Add(ms) - ms; return w / 1e9, int32(w % 1e9) }, 1).
		WithRandSource(h)
}

func (m *wasmModule) instantiate() (*wasmInstance, error) {
	defer watch(&m.name)()
	host := newHostState()
	mod, err := m.rt.InstantiateModule(context.Background(), m.compiled, host.config())
	if err != nil {
		return nil, fmt.Errorf("%s: instantiating: %w", m.name, err)
	}
	in := &wasmInstance{m: m, mod: mod, mem: mod.Memory(), alloc: mod.ExportedFunction("alloc"), step: mod.ExportedFunction("step"), host: host}
	for i := range m.globals {
		g, ok := mod.ExportedGlobal(globalName(i)).(api.MutableGlobal)
		if !ok { // Go's globals are all mutable; an immutable one needs no restoring
			continue
		}
		in.globals = append(in.globals, g)
	}
	return in, nil
}

func (in *wasmInstance) close() {
	if in.mod != nil {
		in.mod.Close(context.Background())
	}
}

// run sends one batch and returns a copy of the reply. After a failed call (a trap) the
// instance is closed and every later call fails.
func (in *wasmInstance) run(batch []byte) ([]byte, error) {
	if in.dead != nil {
		return nil, in.dead
	}
	if len(batch) > abi.MaxBatch {
		return nil, fmt.Errorf("a batch of %d bytes exceeds the ABI's %d", len(batch), abi.MaxBatch)
	}
	out, err := in.call(batch)
	if err != nil {
		in.dead = fmt.Errorf("%s: %w", in.m.name, err)
		in.close()
		return nil, in.dead
	}
	return out, nil
}

func (in *wasmInstance) call(batch []byte) ([]byte, error) {
	defer watch(&in.m.name)()
	return host.Call(context.Background(), in.alloc, in.step, in.mem, batch)
}

// snapshot is an instance's state: its memory, its globals and its host state.
type snapshot struct {
	mem              []byte
	globals          []uint64
	nano, wall, rand int64
}

func (in *wasmInstance) save() *snapshot {
	view, _ := in.mem.Read(0, in.mem.Size())
	s := &snapshot{mem: append([]byte(nil), view...),
		nano: in.host.nano.Load(), wall: in.host.wall.Load(), rand: int64(in.host.rand.Load())}
	for _, g := range in.globals {
		s.globals = append(s.globals, g.Get())
	}
	return s
}

// restore puts the saved state back. It fails when the memory grew since (memory cannot
// shrink, and the Go runtime inside would take the extra pages as not yet its own and
// grow again): the caller then starts a fresh instance.
func (in *wasmInstance) restore(s *snapshot) error {
	if in.dead != nil {
		return in.dead
	}
	if size := in.mem.Size(); size != uint32(len(s.mem)) {
		return fmt.Errorf("memory grew from %d to %d bytes", len(s.mem), size)
	}
	in.mem.Write(0, s.mem)
	for i, g := range in.globals {
		g.Set(s.globals[i])
	}
	in.host.nano.Store(s.nano)
	in.host.wall.Store(s.wall)
	in.host.rand.Store(uint64(s.rand))
	return nil
}
