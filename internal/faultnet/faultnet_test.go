package faultnet

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// echo is a TCP listener that writes back what it reads and counts the bytes it read.
type echo struct {
	l    net.Listener
	read atomic.Int64
}

func startEcho(t *testing.T) *echo {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					e.read.Add(int64(n))
					if n > 0 {
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return e
}

// link is a Net with one link to a fresh echo listener.
func link(t *testing.T) (*Link, *echo) {
	t.Helper()
	e := startEcho(t)
	n := New()
	t.Cleanup(func() { n.Close() })
	l, err := n.Link("echo", "127.0.0.1", e.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return l, e
}

func dial(t *testing.T, l *Link) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", l.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads it back within bound: the time it took, or an error.
func roundTrip(c net.Conn, msg []byte, bound time.Duration) (time.Duration, error) {
	start := time.Now()
	c.SetDeadline(start.Add(bound))
	if _, err := c.Write(msg); err != nil {
		return 0, err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return 0, err
	}
	if !bytes.Equal(got, msg) {
		return 0, errors.New("echoed bytes differ")
	}
	return time.Since(start), nil
}

func TestLinkPassesBytes(t *testing.T) {
	l, _ := link(t)
	if _, err := roundTrip(dial(t, l), []byte("hello"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// A latency toxic on both directions makes a round trip of at least twice its latency
// (jitter 0); set on one direction, at least once.
func TestLatency(t *testing.T) {
	l, _ := link(t)
	c := dial(t, l)
	if err := l.Add("wan", Latency(60, 0)); err != nil {
		t.Fatal(err)
	}
	rtt, err := roundTrip(c, []byte("ping"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rtt < 120*time.Millisecond {
		t.Errorf("round trip %s with 60 ms each way, want at least 120 ms", rtt)
	}
	if err := l.Remove("wan", Down); err != nil {
		t.Fatal(err)
	}
	if rtt, err = roundTrip(c, []byte("ping"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if rtt < 60*time.Millisecond {
		t.Errorf("round trip %s with 60 ms one way, want at least 60 ms", rtt)
	}
}

// 256 KiB at 1024 KB/s takes at least a quarter of a second (the echo overlaps the two
// directions, so the round trip takes about as long as one way).
func TestBandwidth(t *testing.T) {
	l, _ := link(t)
	c := dial(t, l)
	if err := l.Add("slow", Bandwidth(1024)); err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("x"), 256<<10)
	took, err := roundTrip(c, msg, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if took < 240*time.Millisecond {
		t.Errorf("256 KiB there and back at 1 MB/s took %s, want at least 240 ms", took)
	}
}

// A partition of the dialer's direction drops its bytes before the listener; one of the
// listener's direction lets them arrive and drops the echo; after Heal a new connection
// passes again.
func TestPartition(t *testing.T) {
	l, e := link(t)
	if err := l.Partition(Up); err != nil {
		t.Fatal(err)
	}
	c := dial(t, l)
	if _, err := roundTrip(c, []byte("lost"), 300*time.Millisecond); err == nil {
		t.Fatal("a round trip passed a partition of the dialer's direction")
	}
	if n := e.read.Load(); n != 0 {
		t.Errorf("the listener read %d bytes through a partition of the dialer's direction", n)
	}
	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := l.Partition(Down); err != nil {
		t.Fatal(err)
	}
	c = dial(t, l)
	if _, err := roundTrip(c, []byte("half"), 300*time.Millisecond); err == nil {
		t.Fatal("a round trip passed a partition of the listener's direction")
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.read.Load() != 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := e.read.Load(); n != 4 {
		t.Errorf("the listener read %d bytes with only its direction cut, want 4", n)
	}
	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(dial(t, l), []byte("healed"), 5*time.Second); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}

// A reset toxic resets a connection its timeout after its first byte.
func TestReset(t *testing.T) {
	l, _ := link(t)
	if err := l.Add("flaky", Reset(100)); err != nil {
		t.Fatal(err)
	}
	c := dial(t, l)
	start := time.Now()
	c.SetDeadline(start.Add(5 * time.Second))
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	_, err := io.ReadAll(c)
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("reset after %s, want at least 100 ms", took)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the connection was never reset")
	}
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("read ended with %v, want a reset or EOF", err)
	}
}

// Adding a toxic twice is an error naming it; removing one that is not set is nothing.
func TestToxicNames(t *testing.T) {
	l, _ := link(t)
	if err := l.Add("wan", Latency(1, 0)); err != nil {
		t.Fatal(err)
	}
	if err := l.Add("wan", Latency(1, 0)); err == nil {
		t.Error("a second toxic of the same name was accepted")
	}
	if err := l.Remove("other"); err != nil {
		t.Errorf("removing a toxic never set: %v", err)
	}
	if err := l.Add("bad", Toxic{Type: "no-such-toxic"}); err == nil {
		t.Error("an unknown toxic type was accepted")
	}
}
