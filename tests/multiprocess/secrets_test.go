//go:build multiprocess || scale

package multiprocess

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"plait/internal/cluster"
)

// TestSecretsNeverShown: the binary shows no cluster secret, API token or private key's
// bytes in anything it prints or serves. With a known PLAIT_SECRET it runs refused command
// lines (an unknown flag, -h, token and key files that do not load), then a pair of nodes
// with the secret, tokens and mutual TLS, reads everything they serve and plait status
// prints, reloads a token file and a key that are refused, stops them, and searches every
// output and log for the secret, every token and every key file's contents.
func TestSecretsNeverShown(t *testing.T) {
	const known = "the cluster secret nobody may see, 48 bytes long."
	const refusedToken = "a-refused-line-token-0123456789"
	certs := newCerts(t, "S", "T")
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	replaceFile(t, tokens, apiReadToken+" read\n"+apiAdminToken+" admin\n")
	mine := filepath.Join(dir, "my-token")
	replaceFile(t, mine, apiAdminToken+"\n")

	// What must never appear: the secret, the tokens, and the body of every key file (each
	// PEM block's base64 lines, checked line by line: a message that quoted a part of a key
	// would still show one of them whole or hold a line of it).
	hidden := map[string]string{"the cluster secret": known, "the read token": apiReadToken,
		"the admin token": apiAdminToken, "a refused line's token": refusedToken}
	for _, k := range []string{"ca", "S", "T"} {
		raw, err := os.ReadFile(filepath.Join(certs, k+".key"))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(raw)
		if block == nil {
			t.Fatalf("%s.key holds no PEM block", k)
		}
		for i, line := range strings.Split(string(pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes})), "\n") {
			if len(line) >= 32 && !strings.HasPrefix(line, "-----") {
				hidden[fmt.Sprintf("%s.key's line %d", k, i+1)] = line
			}
		}
	}
	var outputs []struct{ what, text string }
	seen := func(what, text string) { outputs = append(outputs, struct{ what, text string }{what, text}) }

	// Refused command lines, with the secret in the environment.
	env := []string{"PLAIT_SECRET=" + known, "PLAIT_TOKEN=" + apiAdminToken}
	badTokens := filepath.Join(dir, "bad-tokens")
	replaceFile(t, badTokens, apiReadToken+" read\n"+refusedToken+" sudo\n")
	keyAsTokens := filepath.Join(dir, "key-as-tokens")
	caKey, _ := os.ReadFile(filepath.Join(certs, "ca.key"))
	replaceFile(t, keyAsTokens, string(caKey))
	base := []string{"serve", "--name", "S", "--data", filepath.Join(dir, "refused"), "--listen", "127.0.0.1:0"}
	for _, args := range [][]string{
		{"serve", "--bogus"},
		{"serve", "-h"},
		{"status", "--bogus"},
		{"status", "-h"},
		append(append([]string{}, base...), "--api-token-file", badTokens),
		append(append([]string{}, base...), "--api-token-file", keyAsTokens),
		append(append([]string{}, base...), "--api-token-file", filepath.Join(certs, "S.key")),
		append(append([]string{}, base...), "--http-tls-cert", filepath.Join(certs, "S.crt"), "--http-tls-key", filepath.Join(certs, "ca.key")),
		append(append([]string{}, base...), "--http-tls-cert", filepath.Join(certs, "S.key"), "--http-tls-key", filepath.Join(certs, "S.key")),
		append(append([]string{}, base...), "--tls-cert", filepath.Join(certs, "S.crt"), "--tls-key", filepath.Join(certs, "T.key"),
			"--tls-ca", filepath.Join(certs, "ca.crt")),
		append(append([]string{}, base...), "--tls-cert", filepath.Join(certs, "S.key"), "--tls-key", filepath.Join(certs, "S.key"),
			"--tls-ca", filepath.Join(certs, "S.key")),
	} {
		code, out := run(t, env, args...)
		if code != 2 {
			t.Errorf("plait %v: exit %d; want 2 (a refused command line)\n%s", args, code, out)
		}
		seen("plait "+strings.Join(args, " "), out)
	}

	// Two running nodes: the secret, tokens and mutual TLS in use.
	start := func(name string, args ...string) (*cluster.Node, string) {
		logPath := filepath.Join(dir, name+".log")
		log, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { log.Close() })
		n, err := cluster.StartProcess(cluster.Process{Binary: binary, Name: name, DataDir: filepath.Join(dir, name), Secret: known,
			Args: append(append(tlsFlags(certs, name), "--api-token-file", tokens), args...), Output: log, Token: apiReadToken})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Kill() })
		return n, logPath
	}
	tNode, tLog := start("T")
	sNode, sLog := start("S", "--peer", "T=wss://"+strings.TrimPrefix(tNode.URL, "ws://"), "--peer", "Gone=wss://127.0.0.1:1")
	waitFor(t, "S streaming with T", 30*time.Second, func() bool {
		st, err := sNode.Status()
		return err == nil && st.Connected("T")
	})
	client := &http.Client{Timeout: 5 * time.Second}
	for _, n := range []*cluster.Node{sNode, tNode} {
		for _, path := range []string{"/v1/status", "/v1/status/lag", "/metrics", "/", "/healthz"} {
			_, body := request(t, client, "GET", "http://"+n.HTTP+path, apiAdminToken)
			seen(n.Name+" GET "+path, body)
		}
	}
	for _, args := range [][]string{
		{"status", "--http", sNode.HTTP, "--token-file", mine},
		{"status", "--http", sNode.HTTP, "--token-file", mine, "--json"},
		{"status", "--http", sNode.HTTP},
		{"status", "--http", sNode.HTTP, "--token-file", tokens},
	} {
		_, out := run(t, env, args...)
		seen("plait "+strings.Join(args, " "), out)
	}

	// Reloads that are refused: a token file with a bad line, a key that is not the
	// certificate's.
	replaceFile(t, tokens, apiReadToken+" read\n"+refusedToken+" sudo\n")
	replaceFile(t, filepath.Join(certs, "S.key"), string(caKey))
	if err := sNode.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both reloads refused and counted", 30*time.Second, func() bool {
		_, body := request(t, client, "GET", "http://"+sNode.HTTP+"/metrics", apiReadToken)
		return metricValue(body, `plait_api_token_reloads_total{result="failed"}`) == 1 &&
			metricValue(body, `plait_tls_reloads_total{result="failed"}`) >= 1
	})
	for _, n := range []*cluster.Node{sNode, tNode} {
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
	}
	for _, l := range []string{sLog, tLog} {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		seen(filepath.Base(l), string(b))
	}

	for _, o := range outputs {
		for what, h := range hidden {
			if strings.Contains(o.text, h) {
				t.Errorf("%s shows %s", o.what, what)
			}
		}
	}
	if len(outputs) < 20 {
		t.Errorf("only %d outputs were searched", len(outputs))
	}
}
