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

// Conn is an established TCP connection of a process: its two ends.
type Conn struct{ Local, Remote netip.AddrPort }

// TCPConns is the established TCP connections of a running process: the sockets among its
// open files (/proc/PID/fd) that its network namespace's tables (/proc/PID/net/tcp and
// tcp6) show in state ESTABLISHED. A socket of the process in another state (listening,
// closing) is not among them.
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
		conns, err := establishedIn(fmt.Sprintf("/proc/%d/net/%s", pid, table), inodes)
		if err != nil {
			return nil, err
		}
		out = append(out, conns...)
	}
	return out, nil
}

// tcpEstablished is the state ESTABLISHED in /proc/net/tcp's st column.
const tcpEstablished = "01"

// establishedIn is the connections of the table (/proc/net/tcp's format) in state
// ESTABLISHED whose socket inode is one of inodes.
func establishedIn(table string, inodes map[string]bool) ([]Conn, error) {
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
		if len(fields) < 10 || fields[3] != tcpEstablished || !inodes[fields[9]] {
			continue
		}
		local, err := procAddr(fields[1])
		if err != nil {
			return nil, fmt.Errorf("cluster: %s: %w", table, err)
		}
		remote, err := procAddr(fields[2])
		if err != nil {
			return nil, fmt.Errorf("cluster: %s: %w", table, err)
		}
		out = append(out, Conn{local, remote})
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
