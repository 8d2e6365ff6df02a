package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// probeDir picks where to time flushes: beside the server's data directory
// (same filesystem, without writing into PostgreSQL's own directory) when it
// is visible from here, else the temp directory.
func probeDir(dataDir string) string {
	if dataDir != "" {
		parent := filepath.Dir(dataDir)
		if st, err := os.Stat(parent); err == nil && st.IsDir() {
			f, err := os.CreateTemp(parent, ".jejak-bench-probe-*")
			if err == nil {
				f.Close()
				os.Remove(f.Name())
				return parent
			}
		}
	}
	return os.TempDir()
}

// fsyncProbe times 8 KiB write + fdatasync pairs (what a WAL commit costs)
// for up to 200 operations or one second, whichever comes first.
func fsyncProbe(dir string) (string, error) {
	f, err := os.CreateTemp(dir, ".jejak-bench-fsync-*")
	if err != nil {
		return "", fmt.Errorf("create probe file: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 8192)
	var samples []time.Duration
	deadline := time.Now().Add(time.Second)
	for len(samples) < 200 && time.Now().Before(deadline) {
		t := time.Now()
		if _, err := f.WriteAt(buf, 0); err != nil {
			return "", fmt.Errorf("probe write: %w", err)
		}
		if err := fdatasync(f); err != nil {
			return "", fmt.Errorf("probe fdatasync: %w", err)
		}
		samples = append(samples, time.Since(t))
	}
	slices.Sort(samples)
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	us := func(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d.Nanoseconds())/1000) }
	return fmt.Sprintf("dir=%s ops=%d write8k_fdatasync_avg_us=%s p50_us=%s max_us=%s",
		dir, len(samples), us(sum/time.Duration(len(samples))), us(samples[len(samples)/2]), us(samples[len(samples)-1])), nil
}

// pgTestFsync runs PostgreSQL's pg_test_fsync for one second per test and
// returns its output.
func pgTestFsync(ctx context.Context, dir string) (string, error) {
	bin := "pg_test_fsync"
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_test_fsync")
	sort.Strings(matches)
	if len(matches) > 0 {
		bin = matches[len(matches)-1]
	}
	file := filepath.Join(dir, fmt.Sprintf(".jejak-bench-pg_test_fsync-%d", os.Getpid()))
	defer os.Remove(file)
	out, err := exec.CommandContext(ctx, bin, "-s", "1", "-f", file).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s", bin, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
