//go:build multiprocess || scale

package multiprocess

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"plait/internal/cluster"
	"plait/protocol/handshake"
	"plait/shells/native/httpapi"
)

// What the TLS tests share: certificates made by the binary's own plait cert, nodes started
// with or without a cluster secret, peer URLs by scheme, /metrics read as numbers, and a
// client's own TLS handshake with a node's replication listener.

// plaitCert runs the binary's plait cert with args; it must exit 0.
func plaitCert(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(binary, append([]string{"cert"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("plait cert %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newCerts makes, with plait cert, a CA in a fresh temporary directory and a node
// certificate for each name, with the host 127.0.0.1 (the address peers dial); it returns
// the directory.
func newCerts(t *testing.T, names ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	plaitCert(t, "ca", "--dir", dir)
	for _, n := range names {
		plaitCert(t, "node", "--dir", dir, "--name", n, "--host", "127.0.0.1")
	}
	return dir
}

// tlsFlags are plait serve's flags for the certificate of name in dir.
func tlsFlags(dir, name string) []string {
	return []string{"--tls-cert", filepath.Join(dir, name+".crt"), "--tls-key", filepath.Join(dir, name+".key"),
		"--tls-ca", filepath.Join(dir, "ca.crt")}
}

// serveSecret is serve with the cluster secret sec: "" runs the node with none, as mutual
// TLS allows.
func serveSecret(t *testing.T, name, sec string, args ...string) *proc {
	t.Helper()
	return serveProcess(t, cluster.Process{Name: name, Secret: sec, Args: args})
}

// serveProcess starts the process c says (its Name, Secret, Args, and Prefix, Listen and
// HTTP when it has them), of the test binary, on a data directory and with a log file in
// the test's temporary directory; it is killed at the test's end if it still runs.
func serveProcess(t *testing.T, c cluster.Process) *proc {
	t.Helper()
	log, err := os.CreateTemp(t.TempDir(), c.Name+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	c.Binary, c.DataDir, c.Output = binary, filepath.Join(t.TempDir(), c.Name), log
	n, err := cluster.StartProcess(c)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{Node: n, t: t, args: c.Args}
	t.Cleanup(p.kill)
	return p
}

// serveTLS starts a node with its certificate from dir and no cluster secret, dialing
// peers over wss://; its own URL is its wss:// one from then on.
func serveTLS(t *testing.T, dir, name string, peers []*proc, args ...string) *proc {
	t.Helper()
	flags := tlsFlags(dir, name)
	for _, q := range peers {
		flags = append(flags, "--peer", q.Name+"="+wssURL(q))
	}
	p := serveSecret(t, name, "", append(flags, args...)...)
	p.URL = wssURL(p)
	return p
}

// listenAddr is a node's replication HOST:PORT.
func listenAddr(p *proc) string {
	return strings.TrimPrefix(strings.TrimPrefix(p.URL, "wss://"), "ws://")
}

func wssURL(p *proc) string { return "wss://" + listenAddr(p) }
func wsURL(p *proc) string  { return "ws://" + listenAddr(p) }

// metrics is p's /metrics as numbers, by the sample's name with its labels as the text
// format prints them: plait_connections_refused_total{code="tls-expired"}.
func (p *proc) metrics() map[string]float64 {
	p.t.Helper()
	code, body := p.get("/metrics")
	if code != http.StatusOK {
		p.t.Fatalf("%s: /metrics: %d %s", p.Name, code, body)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			p.t.Fatalf("%s: /metrics line %q: %v", p.Name, line, err)
		}
		m[line[:i]] = v
	}
	return m
}

// refused is what p counts of refusals of code, by plait_connections_refused_total.
func (p *proc) refused(code string) float64 {
	return p.metrics()[`plait_connections_refused_total{code="`+code+`"}`]
}

// hasRefusal is the last refusal of code in a status's refusals[] that this node
// accepted (dialed false) or dialed (dialed true); ok is false when there is none.
func hasRefusal(st httpapi.StatusDoc, code string, dialed bool) (r httpapi.RefusalDoc, ok bool) {
	for _, f := range st.Refusals {
		if f.Code == code && f.Dialed == dialed {
			r, ok = f, true
		}
	}
	return r, ok
}

// tlsLinks checks that each of p's streaming connections runs bound to its TLS channel
// (capability tls-exporter), and returns how many there are.
func tlsLinks(t *testing.T, p *proc) int {
	t.Helper()
	n := 0
	for _, d := range p.status().Peers {
		if d.State != "streaming" {
			continue
		}
		n++
		if !slices.Contains(d.Capabilities, handshake.CapTLSExporter) {
			t.Errorf("%s: the connection of peer %s streams without %s: %+v", p.Name, d.Name, handshake.CapTLSExporter, d)
		}
	}
	return n
}

// streamingTLS reports whether p streams with every one of names, each link bound to TLS.
func streamingTLS(p *proc, names ...string) bool {
	seen := map[string]bool{}
	for _, d := range p.status().Peers {
		if d.Connected && slices.Contains(d.Capabilities, handshake.CapTLSExporter) {
			seen[d.Name] = true
		}
	}
	for _, n := range names {
		if !seen[n] {
			return false
		}
	}
	return true
}

// leaf is the certificate of a PEM file.
func leaf(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s holds no PEM block", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clientTLS is a client configuration presenting the certificate of name in dir (none
// when name is empty) that accepts any listener certificate: the test looks at it itself.
func clientTLS(t *testing.T, dir, name string) *tls.Config {
	t.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	if name != "" {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// tlsHello completes a TLS handshake with p's replication listener and then, since in TLS
// 1.3 a client's handshake ends before the listener verified its certificate, sends a
// request and reads until the listener closes or answers: by then it gave its verdict.
func tlsHello(p *proc, cfg *tls.Config) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", listenAddr(p), cfg)
	if err != nil {
		return // refused within the handshake
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET /v1/replicate HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", listenAddr(p))
	_, _ = bufio.NewReader(c).ReadString(0) // to the close, or a byte 0 of an answer, or the deadline
}

// presented is the serial number of the certificate p's listener presents to a new
// connection now.
func presented(t *testing.T, p *proc, cfg *tls.Config) string {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", listenAddr(p), cfg)
	if err != nil {
		t.Fatalf("a TLS handshake with %s: %v", p.Name, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}
