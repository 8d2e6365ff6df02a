package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"
)

// checkPprofAddr refuses a profiling address that other machines could
// reach, unless allowRemote: profiles expose the program's internals and
// a CPU profile costs CPU, so they stay on loopback by default. Only a
// loopback IP or "localhost" counts; an empty host (":6060") listens on
// every interface.
func checkPprofAddr(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("JEJAK_PPROF_ADDR must be host:port such as 127.0.0.1:6060, got %q", addr)
	}
	if allowRemote {
		return nil
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("JEJAK_PPROF_ADDR %q is not a loopback address: profiles would be reachable from other machines; use 127.0.0.1:PORT, or set JEJAK_PPROF_ALLOW_REMOTE=true", addr)
}

// pprofServer serves net/http/pprof on its own listener and mux, apart
// from the dashboard's, so profiling never passes through (or opens up)
// the dashboard's middleware and routes.
type pprofServer struct {
	srv  *http.Server
	ln   net.Listener
	errc chan error
}

// startPprof listens on addr and serves /debug/pprof/ until stop.
func startPprof(addr string, log *slog.Logger) (*pprofServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("JEJAK_PPROF_ADDR: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// No write timeout: a CPU profile or trace streams for its ?seconds=.
	p := &pprofServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln: ln, errc: make(chan error, 1)}
	go func() { p.errc <- p.srv.Serve(ln) }()
	log.Info("pprof is listening", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return p, nil
}

// addr is the address the profiler listens on (the port chosen when addr
// asked for :0).
func (p *pprofServer) addr() string { return p.ln.Addr().String() }

// stop shuts the profiler down, cutting a profile in progress.
func (p *pprofServer) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		_ = p.srv.Close()
	}
	if err := <-p.errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		slog.Default().Warn("pprof server", "error", err.Error())
	}
}
