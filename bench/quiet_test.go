package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseLoadavg(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0.52 0.58 0.59 1/467 12345\n", 0.52, true},
		{"17.88 7.92 3.49 26/322 24300", 17.88, true},
		{"0.00 0.01 0.05 1/80 1", 0, true},
		{"", 0, false},
		{"0.52 0.58", 0, false},
		{"busy 0.58 0.59 1/467 12345", 0, false},
		{"-1 0.58 0.59 1/467 12345", 0, false},
	} {
		got, err := parseLoadavg(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseLoadavg(%q) = %v, %v; want %v, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

// loads replays a sequence of load readings (the last one repeats) and
// counts the reads; ticks counts the gate's polls, answered at once.
type loads struct {
	seq   []float64
	reads int
	ticks int
}

func (l *loads) read() (float64, error) {
	v := l.seq[min(l.reads, len(l.seq)-1)]
	l.reads++
	return v, nil
}

func (l *loads) after(time.Duration) <-chan time.Time {
	l.ticks++
	ch := make(chan time.Time, 1)
	ch <- time.Time{}
	return ch
}

func TestQuietGateWaitsUntilLoadFalls(t *testing.T) {
	t.Parallel()
	l := &loads{seq: []float64{3.1, 1.4, 0.7, 0.2}}
	g := quietGate{threshold: 1.0, maxWait: time.Minute, poll: 5 * time.Second, after: l.after}
	var out strings.Builder
	load, ok := g.wait(context.Background(), &out, l.read, "round 1/1 burndown system=jejak")
	if !ok || load != 0.7 || l.ticks != 2 {
		t.Fatalf("wait = %v, %v after %d polls; want the first reading below 1.0 (0.7) after 2 polls\n%s", load, ok, l.ticks, out.String())
	}
	if !strings.Contains(out.String(), "waits for load1 < 1.00 (now 3.10)") || !strings.Contains(out.String(), "starts at load1=0.70 after 10s") {
		t.Fatalf("progress lines:\n%s", out.String())
	}
}

func TestQuietGateGivesUpAfterMaxWait(t *testing.T) {
	t.Parallel()
	l := &loads{seq: []float64{4}}
	g := quietGate{threshold: 1.0, maxWait: 30 * time.Second, poll: 5 * time.Second, after: l.after}
	var out strings.Builder
	load, ok := g.wait(context.Background(), &out, l.read, "run")
	if !ok || load != 4 || l.ticks != 6 {
		t.Fatalf("wait = %v, %v after %d polls; want 4 after 6 polls (30s / 5s)", load, ok, l.ticks)
	}
	if !strings.Contains(out.String(), "still not below 1.00 after 30s; running anyway") {
		t.Fatalf("progress lines:\n%s", out.String())
	}
}

func TestQuietGateWithoutThresholdOnlyReads(t *testing.T) {
	t.Parallel()
	l := &loads{seq: []float64{9}}
	load, ok := quietGate{after: l.after}.wait(context.Background(), io.Discard, l.read, "run")
	if !ok || load != 9 || l.ticks != 0 || l.reads != 1 {
		t.Fatalf("wait = %v, %v with %d polls, %d reads; want the reading at once", load, ok, l.ticks, l.reads)
	}
	_, ok = quietGate{threshold: 1}.wait(context.Background(), io.Discard, func() (float64, error) { return 0, errors.New("no /proc") }, "run")
	if ok {
		t.Fatal("an unreadable load average reported as known")
	}
}
