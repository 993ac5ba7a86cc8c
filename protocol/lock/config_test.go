package lock_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"plait/protocol/lock"
)

func goodConfig() lock.Config {
	return lock.Config{MaxTTL: 10 * time.Second, MaxWait: 5 * time.Second, MaxLeases: 2, MaxWaiters: 2, Drift: lock.DefaultDrift, OffsetBound: 500 * time.Millisecond}
}

// TestConfigBounds puts every bound of a Config at its limit (accepted) and one past it
// (refused with its named error).
func TestConfigBounds(t *testing.T) {
	with := func(f func(*lock.Config)) lock.Config { c := goodConfig(); f(&c); return c }
	for _, tc := range []struct {
		name string
		cfg  lock.Config
		want error // nil: accepted
	}{
		{"good", goodConfig(), nil},
		{"MaxTTL at its limit", with(func(c *lock.Config) { c.MaxTTL = lock.MaxTTLLimit }), nil},
		{"MaxTTL one past its limit", with(func(c *lock.Config) { c.MaxTTL = lock.MaxTTLLimit + 1 }), lock.ErrMaxTTL},
		{"MaxTTL at its floor", with(func(c *lock.Config) { c.MaxTTL = 1 }), nil},
		{"MaxTTL one past its floor", with(func(c *lock.Config) { c.MaxTTL = 0 }), lock.ErrMaxTTL},
		{"MaxWait at its limit", with(func(c *lock.Config) { c.MaxWait = lock.MaxWaitLimit }), nil},
		{"MaxWait one past its limit", with(func(c *lock.Config) { c.MaxWait = lock.MaxWaitLimit + 1 }), lock.ErrMaxWait},
		{"MaxWait at its floor", with(func(c *lock.Config) { c.MaxWait = 0 }), nil},
		{"MaxWait one past its floor", with(func(c *lock.Config) { c.MaxWait = -1 }), lock.ErrMaxWait},
		{"MaxLeases at its floor", with(func(c *lock.Config) { c.MaxLeases = 1 }), nil},
		{"MaxLeases one past its floor", with(func(c *lock.Config) { c.MaxLeases = 0 }), lock.ErrMaxLeases},
		{"MaxWaiters at its floor", with(func(c *lock.Config) { c.MaxWaiters = 0 }), nil},
		{"MaxWaiters one past its floor", with(func(c *lock.Config) { c.MaxWaiters = -1 }), lock.ErrMaxWaiters},
		{"Drift at its limit", with(func(c *lock.Config) { c.Drift = lock.DriftLimit }), nil},
		{"Drift one past its limit", with(func(c *lock.Config) { c.Drift = math.Nextafter(lock.DriftLimit, 1) }), lock.ErrDrift},
		{"Drift at its floor", with(func(c *lock.Config) { c.Drift = 0 }), nil},
		{"Drift one past its floor", with(func(c *lock.Config) { c.Drift = math.Nextafter(0, -1) }), lock.ErrDrift},
		{"Drift NaN", with(func(c *lock.Config) { c.Drift = math.NaN() }), lock.ErrDrift},
		{"Drift infinite", with(func(c *lock.Config) { c.Drift = math.Inf(1) }), lock.ErrDrift},
		{"OffsetBound at its limit", with(func(c *lock.Config) { c.OffsetBound = lock.OffsetBoundLimit }), nil},
		{"OffsetBound one past its limit", with(func(c *lock.Config) { c.OffsetBound = lock.OffsetBoundLimit + 1 }), lock.ErrOffsetBound},
		{"OffsetBound at its floor", with(func(c *lock.Config) { c.OffsetBound = 1 }), nil},
		{"OffsetBound one past its floor: the guard off", with(func(c *lock.Config) { c.OffsetBound = 0 }), lock.ErrOffsetBound},
		{"no delegation, no block", with(func(c *lock.Config) { c.MaxDelegations, c.DelegationBlock = 0, 0 }), nil},
		{"MaxDelegations one past its floor", with(func(c *lock.Config) { c.MaxDelegations = -1 }), lock.ErrDelegation},
		{"DelegationBlock at its limit", with(func(c *lock.Config) {
			c.MaxDelegations, c.DelegationBlock, c.MaxDelegationTTL = 1, lock.DelegationBlockLimit, time.Second
		}), nil},
		{"DelegationBlock one past its limit", with(func(c *lock.Config) {
			c.MaxDelegations, c.DelegationBlock, c.MaxDelegationTTL = 1, lock.DelegationBlockLimit+1, time.Second
		}), lock.ErrDelegation},
		{"DelegationBlock at its floor", with(func(c *lock.Config) { c.MaxDelegations, c.DelegationBlock, c.MaxDelegationTTL = 1, 1, time.Second }), nil},
		{"DelegationBlock one past its floor", with(func(c *lock.Config) { c.MaxDelegations, c.DelegationBlock, c.MaxDelegationTTL = 1, 0, time.Second }), lock.ErrDelegation},
		{"MaxDelegationTTL at its limit", with(func(c *lock.Config) { c.MaxDelegations, c.DelegationBlock, c.MaxDelegationTTL = 1, 1, lock.MaxTTLLimit }), nil},
		{"MaxDelegationTTL one past its limit", with(func(c *lock.Config) {
			c.MaxDelegations, c.DelegationBlock, c.MaxDelegationTTL = 1, 1, lock.MaxTTLLimit+1
		}), lock.ErrDelegation},
		{"MaxDelegationTTL one past its floor", with(func(c *lock.Config) { c.MaxDelegations, c.DelegationBlock, c.MaxDelegationTTL = 1, 1, 0 }), lock.ErrDelegation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Check()
			if tc.want == nil && err != nil {
				t.Fatalf("Check() = %v, want nil", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Check() = %v, want %v", err, tc.want)
			}
			_, nerr := lock.New(tc.cfg, homeA, 1, epoch)
			if (nerr == nil) != (err == nil) {
				t.Fatalf("New refused with %v where Check answered %v", nerr, err)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	if _, err := lock.New(goodConfig(), homeA, 0, epoch); !errors.Is(err, lock.ErrIncarnation) {
		t.Fatalf("incarnation 0: %v, want ErrIncarnation", err)
	}
	if _, err := lock.New(goodConfig(), [16]byte{}, 1, epoch); !errors.Is(err, lock.ErrHome) {
		t.Fatalf("the zero home: %v, want ErrHome", err)
	}
}

// TestDriftArithmetic checks the two ends of a lease: the home keeps it for ttl·(1+ρ)
// rounded up, the holder stops at ttl·(1−ρ) rounded down, so the holder's share never
// reaches the home's, even at the largest ttl and ρ.
func TestDriftArithmetic(t *testing.T) {
	for _, tc := range []struct {
		ttl       time.Duration
		rho       float64
		home, own time.Duration
	}{
		{10 * time.Second, 0.001, 10*time.Second + 10*time.Millisecond, 10*time.Second - 10*time.Millisecond},
		{time.Nanosecond, 0.001, 2, 0},                            // the nanosecond rounds toward safety at both ends
		{1500 * time.Nanosecond, 0.001, 1502, 1498},               // 1.5 ns of drift: 2 each way
		{10 * time.Second, 0, 10 * time.Second, 10 * time.Second}, // no drift allowed, none added
		{lock.MaxTTLLimit, lock.DriftLimit, lock.MaxTTLLimit + lock.MaxTTLLimit/10, lock.MaxTTLLimit - lock.MaxTTLLimit/10},
	} {
		if got := lock.HomeTTL(tc.ttl, tc.rho); got != tc.home {
			t.Errorf("HomeTTL(%v, %v) = %v, want %v", tc.ttl, tc.rho, got, tc.home)
		}
		if got := lock.HolderDeadline(epoch, tc.ttl, tc.rho).Sub(epoch); got != tc.own {
			t.Errorf("HolderDeadline(epoch, %v, %v) - epoch = %v, want %v", tc.ttl, tc.rho, got, tc.own)
		}
	}
	cfg := goodConfig()
	if got, want := cfg.Quarantine(), 10*time.Second+10*time.Millisecond+500*time.Millisecond; got != want {
		t.Fatalf("Quarantine() = %v, want %v", got, want)
	}
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
