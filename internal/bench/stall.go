package bench

import (
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"plait/internal/cluster"
)

// stallResult is the memory of a sender and its stopped receiver, each its own process.
type stallResult struct {
	senderIdle, senderPeak        int64 // bytes
	receiverStopped, receiverPeak int64
	catchUp                       float64 // records per second once the receiver resumed
}

// startProcess runs c.Binary's plait serve as node name in dir, with c's --sync.
func (c *run) startProcess(dir, name string, args ...string) (*cluster.Node, error) {
	return cluster.StartProcess(cluster.Process{Binary: c.Binary, Name: name, DataDir: filepath.Join(dir, name),
		Secret: benchSecret, Args: append([]string{"--sync", string(c.Sync)}, args...)})
}

// stalledReceiver runs A and B as processes (B dials A), stops B with SIGSTOP, writes
// c.Stalled records to A as HTTP batches while sampling A's resident memory, then resumes
// B and times its catch-up.
func (c *run) stalledReceiver() (stallResult, error) {
	var res stallResult
	dir := filepath.Join(c.dir, "stalled")
	a, err := c.startProcess(dir, "A")
	if err != nil {
		return res, err
	}
	defer stop(a)
	b, err := c.startProcess(dir, "B", "--peer", a.PeerFlag())
	if err != nil {
		return res, err
	}
	defer stop(b) // SIGCONT first: nothing is left stopped
	if err := cluster.WaitEvery("B connected to A", time.Minute, pollEvery, func() bool {
		st, err := b.Status()
		return err == nil && st.Connected("A")
	}); err != nil {
		return res, err
	}
	if err := b.Signal(syscall.SIGSTOP); err != nil {
		return res, err
	}
	if res.senderIdle, err = a.Memory("VmRSS"); err != nil {
		return res, err
	}
	if res.receiverStopped, err = b.Memory("VmRSS"); err != nil {
		return res, err
	}
	watch := a.WatchRSS(20 * time.Millisecond)
	txns, err := c.writeRecords(a, 0, c.Stalled, c.Writers, viaJSON)
	peak := watch()
	if err != nil {
		return res, err
	}
	hwm, err := a.Memory("VmHWM") // the kernel's peak, between samples too
	if err != nil {
		return res, err
	}
	res.senderPeak = max(peak, hwm)
	begin := time.Now()
	if err := b.Signal(syscall.SIGCONT); err != nil {
		return res, err
	}
	if err := cluster.WaitEvery("B caught up after resuming", benchBound, pollEvery, func() bool {
		st, err := b.Status()
		o, _ := st.Origin("A")
		return err == nil && o.AppliedSeq >= txns
	}); err != nil {
		return res, err
	}
	res.catchUp = float64(c.Stalled) / time.Since(begin).Seconds()
	if res.receiverPeak, err = b.Memory("VmHWM"); err != nil {
		return res, fmt.Errorf("receiver: %w", err)
	}
	return res, nil
}
