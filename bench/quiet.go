package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// quietGate holds each benchmark run until the machine's 1-minute load
// average falls below threshold, for at most maxWait: on a shared machine
// the figures of a lone operator are only comparable when nothing else
// ran. The load each run started at is printed beside its figures either
// way.
type quietGate struct {
	threshold float64       // 0: do not wait, only read the load
	maxWait   time.Duration // then run anyway
	poll      time.Duration // 0: quietPoll
	// after is time.After; tests replace it.
	after func(time.Duration) <-chan time.Time
}

// quietPoll is how often the gate reads the load average: the kernel
// recomputes it every 5 seconds.
const quietPoll = 5 * time.Second

// wait returns the load average once it is below the threshold (or at
// once when there is none), or when maxWait has passed or ctx ended; ok is
// false when the load could not be read. what names the run in the
// progress lines written to w.
func (g quietGate) wait(ctx context.Context, w io.Writer, read func() (float64, error), what string) (load float64, ok bool) {
	poll, after := g.poll, g.after
	if poll <= 0 {
		poll = quietPoll
	}
	if after == nil {
		after = time.After
	}
	load, err := read()
	if err != nil {
		fmt.Fprintf(w, "# load average unreadable before %s: %v\n", what, err)
		return 0, false
	}
	if g.threshold <= 0 || load < g.threshold {
		return load, true
	}
	fmt.Fprintf(w, "# %s waits for load1 < %.2f (now %s)\n", what, g.threshold, formatLoad(load))
	var waited time.Duration
	for waited < g.maxWait {
		select {
		case <-ctx.Done():
			return load, true
		case <-after(poll):
		}
		waited += poll
		if load, err = read(); err != nil {
			fmt.Fprintf(w, "# load average unreadable before %s: %v\n", what, err)
			return 0, false
		}
		if load < g.threshold {
			fmt.Fprintf(w, "# %s starts at load1=%s after %s\n", what, formatLoad(load), waited)
			return load, true
		}
	}
	fmt.Fprintf(w, "# %s: load1=%s still not below %.2f after %s; running anyway\n", what, formatLoad(load), g.threshold, g.maxWait)
	return load, true
}

// readLoad1 reads the 1-minute load average from /proc/loadavg.
func readLoad1() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	return parseLoadavg(string(b))
}

// parseLoadavg takes the 1-minute load average from the text of
// /proc/loadavg ("0.52 0.58 0.59 1/467 12345").
func parseLoadavg(s string) (float64, error) {
	fields := strings.Fields(s)
	if len(fields) < 3 {
		return 0, fmt.Errorf("loadavg %q: want at least 3 fields", s)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("loadavg %q: 1-minute average %q is not a load", s, fields[0])
	}
	return v, nil
}

func formatLoad(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
