package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"plait/internal/testnet"
)

const (
	testReadToken  = "plait-cmd-test-read-token"
	testAdminToken = "plait-cmd-test-admin-token"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	// Through a rename, as an operator's tools replace a file: a reader sees the old one or
	// the new one.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// running is a plait serve of this process (runServe), with the channel its SIGHUPs
// arrive on.
type running struct {
	cfg *serveConfig
	hup chan os.Signal
}

// startServe runs plait serve with args (and a fresh data directory and listener) until
// the test ends; it returns once /healthz answers 200 over scheme.
func startServe(t *testing.T, scheme string, args ...string) *running {
	t.Helper()
	args = append([]string{"--name", "S", "--data", t.TempDir(), "--listen", testnet.FreeAddr(t)}, args...)
	cfg, err := parseServe(args, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	r := &running{cfg: cfg, hup: make(chan os.Signal, 1)}
	cfg.hup = r.hup
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // health only: the certificate is checked elsewhere
	poll(t, "/healthz", func() bool {
		select {
		case err := <-done:
			done <- err // for the cleanup, which waits for it: taken here, it would wait for ever
			t.Fatalf("plait serve ended: %v", err)
		default:
		}
		resp, err := client.Get(scheme + "://" + loopbackOf(cfg.httpListen) + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return r
}

// loopbackOf is the 127.0.0.1 address of a listen address's port.
func loopbackOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return net.JoinHostPort("127.0.0.1", port)
}

// poll waits for cond, for at most 10 s.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// get is a GET with a bearer token (none when empty): the status and the body.
func get(t *testing.T, client *http.Client, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// series is the value of one series, named with its labels, in a /metrics body (-1 when
// it is not there).
func series(body, name string) float64 {
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// serveRefused runs plait serve with args, on a data directory and listener of the test's,
// and returns its exit status and message. A serve that does not return within 10 s has
// started a node instead of refusing the command line: that fails the test at once (the
// node is left to the test binary's exit).
func serveRefused(t *testing.T, args ...string) (int, string) {
	t.Helper()
	args = append([]string{"--data", t.TempDir(), "--listen", testnet.FreeAddr(t)}, args...)
	type result struct {
		code   int
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		var stderr bytes.Buffer
		code := serve(args, &stderr)
		done <- result{code, stderr.String()}
	}()
	select {
	case r := <-done:
		return r.code, r.stderr
	case <-time.After(10 * time.Second):
		t.Fatalf("plait serve %v started a node instead of refusing the command line", args)
		return 0, ""
	}
}

// TestServeRefusesAPIFiles: the new flags' command lines that plait serve refuses, each
// with exit 2 and a message naming the flag, and never a token of the file.
func TestServeRefusesAPIFiles(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	writeFile(t, bad, "# tokens\n"+testReadToken+" read\n"+testAdminToken+" root\n")
	short := filepath.Join(dir, "short")
	writeFile(t, short, "tooshort read\n")
	good := filepath.Join(dir, "good")
	writeFile(t, good, testReadToken+" read\n")
	notPEM := filepath.Join(dir, "not.pem")
	writeFile(t, notPEM, "not a certificate\n")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--http", "0.0.0.0:7401"}, []string{"--http", "--api-token-file", "--insecure-open-api"}},
		{[]string{"--http", ":7401"}, []string{"--http", "--api-token-file"}},
		{[]string{"--http", "[::]:7401"}, []string{"--http", "--api-token-file"}},
		{[]string{"--api-token-file", bad}, []string{"--api-token-file", "line 3", `unknown scope "root"`}},
		{[]string{"--api-token-file", short}, []string{"--api-token-file", "line 1", "shorter than 16"}},
		{[]string{"--api-token-file", filepath.Join(dir, "missing")}, []string{"--api-token-file", "missing"}},
		{[]string{"--http", "0.0.0.0:7401", "--api-token-file", bad}, []string{"--api-token-file", "line 3"}},
		{[]string{"--http-tls-cert", notPEM}, []string{"--http-tls-cert", "--http-tls-key", "both or neither"}},
		{[]string{"--http-tls-key", notPEM}, []string{"--http-tls-cert", "--http-tls-key", "both or neither"}},
		{[]string{"--http-tls-cert", notPEM, "--http-tls-key", notPEM}, []string{"--http-tls-cert", "not.pem"}},
		{[]string{"--http-tls-cert", filepath.Join(dir, "none.crt"), "--http-tls-key", notPEM}, []string{"--http-tls-cert", "none.crt"}},
		{[]string{"--insecure-open-api=maybe"}, []string{"-insecure-open-api"}},
	} {
		code, stderr := serveRefused(t, c.args...)
		for _, w := range c.want {
			if code != 2 || !strings.Contains(stderr, w) {
				t.Errorf("plait serve %v: exit %d, %q; want 2 naming %s", c.args, code, stderr, w)
			}
		}
		for _, tok := range []string{testReadToken, testAdminToken, "tooshort"} {
			if strings.Contains(stderr, tok) {
				t.Errorf("plait serve %v: the message %q shows a token", c.args, stderr)
			}
		}
	}
	// Accepted: tokens off loopback; no tokens with the flag that opens the API on purpose;
	// loopback names of every kind without either.
	for _, args := range [][]string{
		{"--http", "0.0.0.0:7401", "--api-token-file", good},
		{"--http", "0.0.0.0:7401", "--insecure-open-api"},
		{"--http", "localhost:7401"}, {"--http", "127.0.0.2:7401"}, {"--http", "[::1]:7401"},
	} {
		if _, err := parseServe(args, &bytes.Buffer{}); err != nil {
			t.Errorf("plait serve %v: %v", args, err)
		}
	}
}

// TestServeInsecureOpenAPI: with --insecure-open-api a node whose --http is every
// interface starts, and its API answers without a token.
func TestServeInsecureOpenAPI(t *testing.T) {
	_, port, _ := net.SplitHostPort(testnet.FreeAddr(t))
	r := startServe(t, "http", "--http", "0.0.0.0:"+port, "--insecure-open-api")
	if s, body := get(t, http.DefaultClient, "http://"+loopbackOf(r.cfg.httpListen)+"/v1/status", ""); s != 200 {
		t.Errorf("status of an open API: %d %s", s, body)
	}
}

// newCert makes a CA in dir (when there is none yet) and node certificate S for
// 127.0.0.1 with plait cert, replacing one that is there; it returns the certificate's
// serial number.
func newCert(t *testing.T, dir string) string {
	t.Helper()
	var out, errs bytes.Buffer
	if _, err := os.Stat(filepath.Join(dir, "ca.crt")); err != nil {
		if code := cert([]string{"ca", "--dir", dir}, &out, &errs); code != 0 {
			t.Fatalf("plait cert ca: %s", errs.String())
		}
	}
	if code := cert([]string{"node", "--dir", dir, "--name", "S", "--host", "127.0.0.1", "--overwrite"}, &out, &errs); code != 0 {
		t.Fatalf("plait cert node: %s", errs.String())
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "S.crt"), filepath.Join(dir, "S.key"))
	if err != nil {
		t.Fatal(err)
	}
	return pair.Leaf.SerialNumber.String()
}

// servedSerial is the serial number of the certificate the HTTPS listener at addr serves.
func servedSerial(t *testing.T, addr string, roots *x509.CertPool) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatalf("tls dial %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestServeHTTPSWithTokens: a node serving its API over HTTPS with a certificate of plait
// cert, and tokens; plait status reads it with --ca and --token-file (or PLAIT_TOKEN), and
// fails without the token, with a token of no scope, or over plain HTTP.
func TestServeHTTPSWithTokens(t *testing.T) {
	dir := t.TempDir()
	serial := newCert(t, dir)
	tokens := filepath.Join(dir, "tokens")
	writeFile(t, tokens, testReadToken+" read\n")
	tokenFile := filepath.Join(dir, "my-token")
	writeFile(t, tokenFile, testReadToken+"\n")
	wrongFile := filepath.Join(dir, "wrong-token")
	writeFile(t, wrongFile, "a-token-this-node-does-not-hold\n")
	ca := filepath.Join(dir, "ca.crt")
	r := startServe(t, "https", "--http", testnet.FreeAddr(t), "--api-token-file", tokens,
		"--http-tls-cert", filepath.Join(dir, "S.crt"), "--http-tls-key", filepath.Join(dir, "S.key"))
	addr := r.cfg.httpListen

	pem, _ := os.ReadFile(ca)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	if got := servedSerial(t, addr, roots); got != serial {
		t.Errorf("serves certificate %s, want %s", got, serial)
	}

	t.Setenv("PLAIT_TOKEN", "")
	run := func(args ...string) (int, string, string) {
		var out, errs bytes.Buffer
		code := status(append([]string{"--http", addr}, args...), &out, &errs)
		return code, out.String(), errs.String()
	}
	if code, out, errs := run("--ca", ca, "--token-file", tokenFile); code != 0 || !strings.Contains(out, "node S ") {
		t.Errorf("plait status --ca --token-file: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := run("--https", "--ca", ca, "--token-file", tokenFile); code != 0 || !strings.Contains(out, "node S ") {
		t.Errorf("plait status --https --ca --token-file: exit %d\n%s%s", code, out, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ca", ca}, "401"},                                   // no token
		{[]string{"--ca", ca, "--token-file", wrongFile}, "401"},        // a token the node does not hold
		{[]string{"--token-file", tokenFile}, "400"},                    // plain HTTP to an HTTPS listener
		{[]string{"--https", "--token-file", tokenFile}, "certificate"}, // the system's roots do not know plait cert's CA
	} {
		if code, _, errs := run(c.args...); code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("plait status %v: exit %d, %q; want 1 with %s", c.args, code, errs, c.want)
		}
	}
	t.Setenv("PLAIT_TOKEN", testReadToken)
	if code, out, errs := run("--ca", ca); code != 0 || !strings.Contains(out, "node S ") {
		t.Errorf("plait status --ca with PLAIT_TOKEN: exit %d\n%s%s", code, out, errs)
	}
	// --token-file wins over the environment.
	if code, _, errs := run("--ca", ca, "--token-file", wrongFile); code != 1 || !strings.Contains(errs, "401") {
		t.Errorf("plait status with a wrong --token-file and a right PLAIT_TOKEN: exit %d, %q; want 1, 401", code, errs)
	}

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	s, body := get(t, client, "https://"+addr+"/metrics", testReadToken)
	if s != 200 || series(body, `plait_http_tls_reloads_total{result="ok"}`) != 0 ||
		series(body, `plait_api_refused_total{code="unauthorized"}`) != 3 {
		t.Errorf("metrics: %d; want TLS reloads at 0 and 3 unauthorized refusals:\n%s", s, body)
	}
	leaf, _ := tls.LoadX509KeyPair(filepath.Join(dir, "S.crt"), filepath.Join(dir, "S.key"))
	if got := series(body, "plait_http_tls_cert_expiry_timestamp_seconds"); got != float64(leaf.Leaf.NotAfter.Unix()) {
		t.Errorf("plait_http_tls_cert_expiry_timestamp_seconds = %v, want %d", got, leaf.Leaf.NotAfter.Unix())
	}
}

// TestStatusRefusesFiles: plait status's own files, refused with exit 2 naming the flag.
func TestStatusRefusesFiles(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, "\n")
	serverFile := filepath.Join(dir, "server-tokens")
	writeFile(t, serverFile, testReadToken+" read\n")
	notPEM := filepath.Join(dir, "not.pem")
	writeFile(t, notPEM, "nothing\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--token-file", filepath.Join(dir, "missing")}, "--token-file"},
		{[]string{"--token-file", empty}, "holds no token"},
		{[]string{"--token-file", serverFile}, "holds more than a token"},
		{[]string{"--ca", filepath.Join(dir, "missing")}, "--ca"},
		{[]string{"--ca", notPEM}, "holds no PEM certificate"},
	} {
		var out, errs bytes.Buffer
		if code := status(c.args, &out, &errs); code != 2 || !strings.Contains(errs.String(), c.want) {
			t.Errorf("plait status %v: exit %d, %q; want 2 with %s", c.args, code, errs.String(), c.want)
		}
		if strings.Contains(errs.String(), testReadToken) {
			t.Errorf("plait status %v: the message shows the token", c.args)
		}
	}
}

// TestServeReloadOnHUP: a SIGHUP reloads the token file and the HTTPS pair; a token file
// or pair that does not load leaves what was loaded in use, and the node serving; each
// reload is counted in the metrics. (The signal itself reaching the loop is the
// multi-process test TestAPITokenReloadOnSIGHUP.)
func TestServeReloadOnHUP(t *testing.T) {
	dir := t.TempDir()
	first := newCert(t, dir)
	tokens := filepath.Join(dir, "tokens")
	writeFile(t, tokens, testReadToken+" read\n")
	r := startServe(t, "https", "--http", testnet.FreeAddr(t), "--api-token-file", tokens,
		"--http-tls-cert", filepath.Join(dir, "S.crt"), "--http-tls-key", filepath.Join(dir, "S.key"))
	addr := r.cfg.httpListen
	pem, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true}}
	statusWith := func(token string) int {
		s, _ := get(t, client, "https://"+addr+"/v1/status", token)
		return s
	}
	metrics := func() string {
		_, body := get(t, client, "https://"+addr+"/metrics", testAdminToken)
		return body
	}

	// Both files replaced, then one SIGHUP.
	writeFile(t, tokens, testAdminToken+" admin\n")
	second := newCert(t, dir)
	if second == first {
		t.Fatal("plait cert --overwrite made the same serial")
	}
	r.hup <- syscall.SIGHUP
	poll(t, "the new token", func() bool { return statusWith(testAdminToken) == 200 })
	poll(t, "the new certificate", func() bool { return servedSerial(t, addr, roots) == second })
	if s := statusWith(testReadToken); s != 401 {
		t.Errorf("a token removed from the file: %d after the reload, want 401", s)
	}
	m := metrics()
	if series(m, `plait_api_token_reloads_total{result="ok"}`) != 1 || series(m, `plait_http_tls_reloads_total{result="ok"}`) != 1 {
		t.Errorf("after one good reload:\n%s", grep(m, "reloads_total"))
	}

	// Both files broken, then a SIGHUP: the node keeps what it had.
	writeFile(t, tokens, testAdminToken+" admin\n"+testReadToken+" everything\n")
	writeFile(t, filepath.Join(dir, "S.crt"), "-----BEGIN CERTIFICATE-----\nbroken\n")
	r.hup <- syscall.SIGHUP
	poll(t, "two failed reloads counted", func() bool {
		m := metrics()
		return series(m, `plait_api_token_reloads_total{result="failed"}`) == 1 && series(m, `plait_http_tls_reloads_total{result="failed"}`) == 1
	})
	if s := statusWith(testAdminToken); s != 200 {
		t.Errorf("the kept token after a refused reload: %d, want 200", s)
	}
	if s := statusWith(testReadToken); s != 401 {
		t.Errorf("a token of the refused file: %d, want 401", s)
	}
	if got := servedSerial(t, addr, roots); got != second {
		t.Errorf("after a refused reload the listener serves %s, want the kept %s", got, second)
	}
}

func grep(body, word string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
