package cluster

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// Conn is a TCP connection of a process: its two ends and its state (ESTABLISHED,
// CLOSE_WAIT, ...).
type Conn struct {
	Local, Remote netip.AddrPort
	State         string
}

// TCPConns is the TCP connections of a running process: the sockets among its open files
// (/proc/PID/fd) that its network namespace's tables (/proc/PID/net/tcp and tcp6) show in
// any state but LISTEN. A connection the peer closed that the process still holds
// (CLOSE_WAIT) is among them; one the process closed is not (its socket is no longer the
// process's, whatever state the kernel keeps it in).
func (n *Node) TCPConns() ([]Conn, error) {
	pid := n.Pid()
	if pid == 0 {
		return nil, fmt.Errorf("cluster: %s is not a running process", n.Name)
	}
	return tcpConns(pid)
}

// tcpConns is TCPConns of the process pid.
func tcpConns(pid int) ([]Conn, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(dir + "/" + fd.Name())
		if err != nil {
			continue // closed since the listing: not one of its sockets now
		}
		if ino, ok := strings.CutPrefix(target, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	var out []Conn
	for _, table := range []string{"tcp", "tcp6"} {
		conns, err := connsIn(fmt.Sprintf("/proc/%d/net/%s", pid, table), inodes)
		if err != nil {
			return nil, err
		}
		out = append(out, conns...)
	}
	return out, nil
}

// tcpStates are the states of /proc/net/tcp's st column (include/net/tcp_states.h).
var tcpStates = map[string]string{"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
	"05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}

// connsIn is the connections of the table (/proc/net/tcp's format), listeners excepted,
// whose socket inode is one of inodes.
func connsIn(table string, inodes map[string]bool) ([]Conn, error) {
	f, err := os.Open(table)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Conn
	sc := bufio.NewScanner(f)
	sc.Scan() // the header line
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] == "0A" || !inodes[fields[9]] {
			continue
		}
		state, ok := tcpStates[fields[3]]
		if !ok {
			state = "state " + fields[3]
		}
		local, err := procAddr(fields[1])
		if err != nil {
			return nil, fmt.Errorf("cluster: %s: %w", table, err)
		}
		remote, err := procAddr(fields[2])
		if err != nil {
			return nil, fmt.Errorf("cluster: %s: %w", table, err)
		}
		out = append(out, Conn{local, remote, state})
	}
	return out, sc.Err()
}

// procAddr reads an address of /proc/net/tcp or tcp6: the address as 32-bit words in the
// host's byte order, in hex, a colon, the port in hex. An IPv4-mapped IPv6 address is
// returned as its IPv4 address.
func procAddr(s string) (netip.AddrPort, error) {
	host, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: %w", s, err)
	}
	raw, err := hex.DecodeString(host)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(b) // 4 or 16 bytes: it cannot fail
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}
