package host

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"plait/protocol/abi"
)

// Module is a compiled core, ready to instantiate.
type Module struct {
	rt         wazero.Runtime
	compiled   wazero.CompiledModule
	abiVersion uint32
	noDeadline bool // WithoutCallDeadline
}

// Option changes how Load compiles and runs a module.
type Option func(*Module)

// WithoutCallDeadline compiles the module without wazero's termination checks, so that a
// call into it is not stopped at its deadline: a guest that loops hangs its caller. The
// checks wazero inserts at every function entry and loop double the time of the Go
// guest's call-heavy code (BENCHMARKS.md §7). For tests
// and tools that trust the module and have a timeout of their own (go test's); a node keeps
// the deadline.
func WithoutCallDeadline() Option { return func(m *Module) { m.noDeadline = true } }

// Load compiles a core module. cacheDir, when not empty, holds wazero's compilation cache
// so that later loads of the same module (in any process) skip compilation. Every call into
// an instance is stopped at its deadline unless WithoutCallDeadline is given.
func Load(ctx context.Context, wasm []byte, cacheDir string, opts ...Option) (*Module, error) {
	m := &Module{}
	for _, o := range opts {
		o(m)
	}
	cfg := wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(!m.noDeadline)
	if cacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(cacheDir)
		if err != nil {
			return nil, fmt.Errorf("compilation cache %s: %w", cacheDir, err)
		}
		cfg = cfg.WithCompilationCache(cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if err := InstantiateImports(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("compiling the core: %w", err)
	}
	for _, name := range []string{"abi_version", "alloc", "step", "_initialize"} {
		if _, ok := compiled.ExportedFunctions()[name]; !ok {
			rt.Close(ctx)
			return nil, fmt.Errorf("the module does not export %q: not a plait core", name)
		}
	}
	m.rt, m.compiled = rt, compiled
	inst, err := m.Instantiate(ctx)
	if err != nil {
		rt.Close(ctx)
		return nil, err
	}
	m.abiVersion = inst.abiVersion
	inst.Close(ctx)
	return m, nil
}

// InstantiateImports gives rt what a core module imports: WASI, and (ABI 4) the module
// "plait" with sha256(data, n, out: i32), the host's SHA-256 of n bytes at data written as
// 32 bytes at out. A module of ABI 1 to 3 imports only WASI; the extra module is unused.
func InstantiateImports(ctx context.Context, rt wazero.Runtime) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return fmt.Errorf("instantiating WASI: %w", err)
	}
	i32 := api.ValueTypeI32
	_, err := rt.NewHostModuleBuilder("plait").NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostSHA256), []api.ValueType{i32, i32, i32}, nil).
		WithParameterNames("data", "n", "out").Export("sha256").
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("instantiating the host module plait: %w", err)
	}
	return nil
}

// hostSHA256 is plait.sha256. A range outside the guest's memory traps the call (a panic
// in a host function becomes the guest call's error).
func hostSHA256(_ context.Context, mod api.Module, stack []uint64) {
	data, n, out := api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
	b, ok := mod.Memory().Read(data, n)
	if !ok {
		panic(fmt.Sprintf("plait.sha256: %d bytes at %d are outside memory", n, data))
	}
	sum := sha256.Sum256(b)
	if !mod.Memory().Write(out, sum[:]) {
		panic(fmt.Sprintf("plait.sha256: the hash at %d is outside memory", out))
	}
}

// ABIVersion is the ABI version the module exports.
func (m *Module) ABIVersion() uint32 { return m.abiVersion }

// Close releases the runtime and every instance.
func (m *Module) Close(ctx context.Context) error { return m.rt.Close(ctx) }

// Instance is one instantiated core running one session.
type Instance struct {
	mod        api.Module
	mem        api.Memory
	alloc      api.Function
	step       api.Function
	abiVersion uint32
	dead       error
}

// Instantiate creates a fresh instance and runs its _initialize.
func (m *Module) Instantiate(ctx context.Context) (*Instance, error) {
	mod, err := m.rt.InstantiateModule(ctx, m.compiled,
		wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize"))
	if err != nil {
		return nil, fmt.Errorf("instantiating the core: %w", err)
	}
	in := &Instance{mod: mod, mem: mod.Memory(), alloc: mod.ExportedFunction("alloc"), step: mod.ExportedFunction("step")}
	res, err := mod.ExportedFunction("abi_version").Call(ctx)
	if err != nil {
		mod.Close(ctx)
		return nil, fmt.Errorf("abi_version: %w", err)
	}
	in.abiVersion = api.DecodeU32(res[0])
	return in, nil
}

// ErrDead is returned by every call on an instance after one of its calls failed.
var ErrDead = errors.New("wasm instance discarded after a failed call")

// Step sends one batch and returns a copy of the reply. After any call error (a trap, a
// deadline) the instance is closed and every later call fails with ErrDead.
func (in *Instance) Step(ctx context.Context, batch []byte) ([]byte, error) {
	if in.dead != nil {
		return nil, fmt.Errorf("%w: %v", ErrDead, in.dead)
	}
	if len(batch) > abi.MaxBatch {
		return nil, fmt.Errorf("a batch of %d bytes exceeds the ABI's %d", len(batch), abi.MaxBatch)
	}
	out, err := in.call(ctx, batch)
	if err != nil {
		in.dead = err
		in.mod.Close(ctx)
		return nil, err
	}
	return out, nil
}

func (in *Instance) call(ctx context.Context, batch []byte) ([]byte, error) {
	return Call(ctx, in.alloc, in.step, in.mem, batch)
}

// Call runs one batch through a core's exports, as ABI.md says (alloc, write the batch,
// step, read the reply), and returns a copy of the reply: a memory view dies when the
// memory grows. It is the whole boundary; Instance uses it, and so can a host that
// instantiates a core its own way (the fuzzers do).
func Call(ctx context.Context, alloc, step api.Function, mem api.Memory, batch []byte) ([]byte, error) {
	res, err := alloc.Call(ctx, uint64(len(batch)))
	if err != nil {
		return nil, fmt.Errorf("alloc: %w", err)
	}
	ptr := api.DecodeU32(res[0])
	if ptr == 0 {
		return nil, fmt.Errorf("alloc refused a batch of %d bytes", len(batch))
	}
	if !mem.Write(ptr, batch) {
		return nil, fmt.Errorf("alloc returned %d, outside memory for %d bytes", ptr, len(batch))
	}
	if res, err = step.Call(ctx, uint64(len(batch))); err != nil {
		return nil, fmt.Errorf("step: %w", err)
	}
	outPtr, outLen := uint32(res[0]>>32), uint32(res[0])
	view, ok := mem.Read(outPtr, outLen)
	if !ok {
		return nil, fmt.Errorf("step returned %d bytes at %d, outside memory", outLen, outPtr)
	}
	return append([]byte(nil), view...), nil
}

// Close releases the instance.
func (in *Instance) Close(ctx context.Context) error { return in.mod.Close(ctx) }
