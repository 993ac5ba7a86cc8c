//go:build multiprocess || scale

package multiprocess

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"plait/internal/cluster"
)

const (
	apiReadToken  = "multi-process-read-token"
	apiAdminToken = "multi-process-admin-token"
)

// replaceFile writes path through a rename, as an operator's tools do: the node reads the
// old file or the new one, never half of one.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// request sends method path to the HTTP API at addr with a bearer token (none when empty).
func request(t *testing.T, client *http.Client, method, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader("v"))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue is one series (its name with labels) of a /metrics body; -1 when absent.
func metricValue(body, name string) float64 {
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			if v, err := strconv.ParseFloat(rest, 64); err == nil {
				return v
			}
		}
	}
	return -1
}

// serveTokens starts a node named name with --api-token-file, a file holding tokens, and
// the further serve flags args (it waits for health with apiReadToken, which tokens must
// hold); it is killed at the test's end. The file's path is returned, for a test that replaces it.
func serveTokens(t *testing.T, name, tokens string, args ...string) (*cluster.Node, string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	replaceFile(t, file, tokens)
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	n, err := cluster.StartProcess(cluster.Process{Binary: binary, Name: name, DataDir: filepath.Join(dir, name), Secret: secret,
		Args: append([]string{"--api-token-file", file}, args...), Output: log, Token: apiReadToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Kill() })
	return n, file
}

// TestAPITokenReloadOnSIGHUP: the binary with --api-token-file answers only its tokens, each
// at its scope; a SIGHUP makes it read the file again, and a file that does not parse leaves
// the tokens before it in use and the node serving; both reloads are counted.
func TestAPITokenReloadOnSIGHUP(t *testing.T) {
	n, tokens := serveTokens(t, "N", "# the dashboards\n"+apiReadToken+" read\n")
	base := "http://" + n.HTTP
	c := http.DefaultClient
	if s, _ := request(t, c, "GET", base+"/v1/status", apiReadToken); s != 200 {
		t.Errorf("status with the read token: %d", s)
	}
	if s, body := request(t, c, "PUT", base+"/v1/tables/t/records/k", apiReadToken); s != 403 || !strings.Contains(body, `"code":"forbidden"`) {
		t.Errorf("a write with the read token: %d %s; want 403 forbidden", s, body)
	}
	if s, _ := request(t, c, "GET", base+"/v1/status", apiAdminToken); s != 401 {
		t.Errorf("status with a token not in the file yet: %d, want 401", s)
	}
	if st, err := n.Status(); err != nil || st.Node.Name != "N" {
		t.Errorf("the harness's status with its token: %v", err)
	}

	replaceFile(t, tokens, apiAdminToken+" admin\n")
	if err := n.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the admin token after SIGHUP", 10*time.Second, func() bool {
		s, _ := request(t, c, "GET", base+"/v1/status", apiAdminToken)
		return s == 200
	})
	if s, _ := request(t, c, "PUT", base+"/v1/tables/t/records/k", apiAdminToken); s != 200 {
		t.Errorf("a write with the admin token: %d", s)
	}
	if s, _ := request(t, c, "GET", base+"/v1/status", apiReadToken); s != 401 {
		t.Errorf("the read token, removed from the file: %d after SIGHUP, want 401", s)
	}

	replaceFile(t, tokens, apiAdminToken+" admin\n"+apiReadToken+" read\n"+apiAdminToken+" read\n")
	if err := n.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refused reload counted", 10*time.Second, func() bool {
		_, body := request(t, c, "GET", base+"/metrics", apiAdminToken)
		return metricValue(body, `plait_api_token_reloads_total{result="failed"}`) == 1
	})
	_, body := request(t, c, "GET", base+"/metrics", apiAdminToken)
	if v := metricValue(body, `plait_api_token_reloads_total{result="ok"}`); v != 1 {
		t.Errorf("plait_api_token_reloads_total{result=\"ok\"} = %v, want 1", v)
	}
	if s, _ := request(t, c, "GET", base+"/v1/status", apiReadToken); s != 401 {
		t.Errorf("a token of the refused file: %d, want 401", s)
	}
	if s, _ := request(t, c, "GET", base+"/v1/status", apiAdminToken); s != 200 {
		t.Errorf("the kept admin token: %d, want 200", s)
	}
	if s, _ := request(t, c, "GET", base+"/healthz", ""); s != 200 {
		t.Errorf("healthz without a token after the reloads: %d", s)
	}
	if err := n.Stop(); err != nil {
		t.Error(err)
	}
}

// run runs the binary with args and the environment's further variables, for at most
// 30 s, and returns its exit status and output.
func run(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee) && ctx.Err() == nil:
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("plait %v: %v\n%s", args, err, out)
	return 0, ""
}

// TestAPIRefusedStarts: the binary refuses, with exit 2 naming the flag, a token file with a
// bad line (never showing a token) and a non-loopback --http without tokens.
func TestAPIRefusedStarts(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "tokens")
	replaceFile(t, bad, apiReadToken+" read\n\n"+apiAdminToken+" admin extra\n")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--api-token-file", bad}, []string{"--api-token-file", "line 3", "3 fields"}},
		{[]string{"--http", "0.0.0.0:0"}, []string{"--http", "--api-token-file", "--insecure-open-api"}},
	} {
		args := append([]string{"serve", "--name", "R", "--data", filepath.Join(dir, "R"), "--listen", "127.0.0.1:0"}, c.args...)
		code, out := run(t, nil, args...)
		for _, w := range c.want {
			if code != 2 || !strings.Contains(out, w) {
				t.Errorf("plait %v: exit %d, %q; want 2 naming %s", args, code, out, w)
			}
		}
		if strings.Contains(out, apiReadToken) || strings.Contains(out, apiAdminToken) {
			t.Errorf("plait %v: the message %q shows a token", args, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "R")); err == nil {
		t.Error("a refused command line created the data directory")
	}
}

// TestAPIHTTPSStatus: the binary serves its API over HTTPS with a node certificate made by
// plait cert, and tokens; plait status reads it with --ca and --token-file, and is refused
// without the token. /healthz stays open over HTTPS.
func TestAPIHTTPSStatus(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"cert", "ca", "--dir", dir}, {"cert", "node", "--dir", dir, "--name", "H", "--host", "127.0.0.1"}} {
		if code, out := run(t, nil, args...); code != 0 {
			t.Fatalf("plait %v: exit %d\n%s", args, code, out)
		}
	}
	tokens, mine := filepath.Join(dir, "tokens"), filepath.Join(dir, "my-token")
	replaceFile(t, tokens, apiReadToken+" read\n")
	replaceFile(t, mine, apiReadToken+"\n")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var out bytes.Buffer
	cmd := exec.Command(binary, "serve", "--name", "H", "--data", filepath.Join(dir, "H"), "--listen", "127.0.0.1:0",
		"--http", addr, "--api-token-file", tokens,
		"--http-tls-cert", filepath.Join(dir, "H.crt"), "--http-tls-key", filepath.Join(dir, "H.key"))
	cmd.Env = append(os.Environ(), "PLAIT_SECRET="+secret)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("plait serve exited: %v\n%s", err, out.String())
			}
		case <-time.After(cluster.StopBound):
			_ = cmd.Process.Kill()
			t.Errorf("plait serve did not stop within %s of SIGTERM", cluster.StopBound)
		}
	}()

	pem, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	waitFor(t, "healthz over HTTPS", cluster.StartBound, func() bool {
		resp, err := client.Get("https://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	code, status := run(t, []string{"PLAIT_TOKEN="}, "status", "--http", addr, "--ca", filepath.Join(dir, "ca.crt"), "--token-file", mine)
	if code != 0 || !strings.Contains(status, "node H ") {
		t.Errorf("plait status --ca --token-file: exit %d\n%s", code, status)
	}
	code, status = run(t, []string{"PLAIT_TOKEN="}, "status", "--http", addr, "--ca", filepath.Join(dir, "ca.crt"))
	if code != 1 || !strings.Contains(status, "401") {
		t.Errorf("plait status --ca without a token: exit %d, %q; want 1 with 401", code, status)
	}
	code, status = run(t, []string{"PLAIT_TOKEN=" + apiReadToken}, "status", "--http", addr, "--ca", filepath.Join(dir, "ca.crt"))
	if code != 0 {
		t.Errorf("plait status --ca with PLAIT_TOKEN: exit %d\n%s", code, status)
	}
}
