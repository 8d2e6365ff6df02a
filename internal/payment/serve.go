package payment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jejakhq/jejak/internal/database"
)

// StartSimulator serves the simulator on a loopback port and returns its
// base URL and a stop function. The binary uses it when no
// JEJAK_PAYMENT_URL is configured, so the provider is always reached over
// real HTTP, exactly like an external one.
func StartSimulator(db database.Pool, log *slog.Logger) (*Simulator, string, func(), error) {
	sim := NewSimulator(db)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, fmt.Errorf("payment simulator: listen: %w", err)
	}
	srv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("payment simulator stopped", "error", err.Error())
		}
	}()
	url := "http://" + ln.Addr().String()
	log.Info("payment simulator listening (JEJAK_PAYMENT_URL unset)", "url", url)
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	return sim, url, stop, nil
}
