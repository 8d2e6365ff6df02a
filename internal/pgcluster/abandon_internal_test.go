package pgcluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A start cut short while pg_ctl waits for the new server (the context
// ends, as when a signal arrives during start-up) returns the context's
// error and leaves no server running on the data directory.
func TestStartCutShortLeavesNoServer(t *testing.T) {
	t.Parallel()
	dir := DataDirForTest(t)
	// initdb and the first start, whole: the cut must fall on a start.
	first, err := Start(context.Background(), dir, "jejak_try")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Should the server outlive the test, stop it (the clean-up of a
	// failure, not part of what is tested).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if _, running := first.runningPort(ctx); running {
			_ = first.run(ctx, filepath.Join(first.BinDir, "pg_ctl"), "stop", "-D", dir, "-m", "immediate", "-w")
		}
	})

	pid := filepath.Join(dir, "postmaster.pid")
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithCancel(context.Background())
		cut := make(chan struct{})
		go func() {
			// The cut comes as soon as the server has written its pid
			// file: it is running, and pg_ctl is still waiting for it.
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if _, err := os.Stat(pid); err == nil {
					close(cut)
					cancel()
					return
				}
				time.Sleep(time.Millisecond) // polling for the pid file, with a deadline
			}
		}()
		c, err := Start(ctx, dir, "jejak_try")
		wasCut := ctx.Err() != nil
		cancel()
		if err == nil {
			// The server was ready before the cut landed: try again.
			if err := c.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if attempt == 5 {
				t.Fatal("five starts finished before the cut; none was cut short")
			}
			continue
		}
		if !wasCut {
			t.Fatalf("start failed without being cut short: %v", err)
		}
		<-cut
		break
	}
	if _, running := first.runningPort(context.Background()); running {
		t.Fatal("a server is still running on the data directory after the start was cut short")
	}
	if _, err := os.Stat(pid); !os.IsNotExist(err) {
		t.Fatalf("postmaster.pid still there: %v", err)
	}
}
