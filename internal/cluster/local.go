package cluster

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// StartLocal starts a node of cfg in this process. A nil cfg.Listener is a fresh one on
// 127.0.0.1; a nil cfg.Logger discards the node's log. With serveHTTP it also serves its
// HTTP API on 127.0.0.1 (Node.HTTP). It returns once the node serves.
func StartLocal(cfg node.Config, serveHTTP bool) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Listener == nil {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		cfg.Listener = l
	}
	url := "ws://" + cfg.Listener.Addr().String()
	n, err := node.Start(cfg)
	if err != nil {
		_ = cfg.Listener.Close() // it may be closed already; the start error is the one to report
		return nil, err
	}
	c := &Node{Name: cfg.Name, DataDir: cfg.DataDir, URL: url, Local: n}
	if serveHTTP {
		hl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(err, n.Stop())
		}
		c.HTTP = hl.Addr().String()
		c.srv = &http.Server{Handler: httpapi.New(n, httpapi.Limits{}), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := c.srv.Serve(hl); err != nil && !errors.Is(err, http.ErrServerClosed) {
				cfg.Logger.Error("http listener", "node", cfg.Name, "err", err)
			}
		}()
	}
	return c, nil
}
