package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Bench is one named benchmark. Run is called once per round per system, in
// the interleaved order the harness chooses; it must set up its own fresh
// state (Env helps) so that rounds do not leak into each other.
type Bench struct {
	// Name is printed after "BENCH"; it may contain a space to group a
	// family ("page /jobs"), and -only matches the whole name or the part
	// before the first space.
	Name string
	// Labels are fixed key=value pairs printed after system= that tell
	// variants of one benchmark apart ("load=engine", "tenants=10000").
	// Name plus Labels identifies a benchmark; -only selects by Name, so
	// one name runs all its variants.
	Labels string
	// Systems the benchmark runs for, in interleaving order; nil = jejak only.
	Systems []string
	// Run measures one round for one system.
	Run func(ctx context.Context, env *Env, system string) (Result, error)
}

// Metric is one measured value. Keys ending in _ms and "seconds" are
// printed with two decimals, keys ending in _per_sec as integers.
type Metric struct {
	Key   string
	Value float64
}

// Result is what one round of one benchmark measured. The first metric is
// the primary one: the summary line adds its min, max and per-round values.
type Result struct {
	Metrics []Metric
	// Load1 is the machine's 1-minute load average when the round started
	// (LoadKnown: it could be read), printed beside the figures.
	Load1     float64
	LoadKnown bool
	// Round is the round the result was taken in (from 1; 0: not known).
	// Variants run in turn within a round, so a variant is compared with
	// its base round by round too: on a machine whose speed drifts over a
	// run, the ratio within a round is steadier than that of the medians.
	Round int
}

// Get returns the value of key and whether it is present.
func (r Result) Get(key string) (float64, bool) {
	for _, m := range r.Metrics {
		if m.Key == key {
			return m.Value, true
		}
	}
	return 0, false
}

var registry []Bench

// register adds a benchmark; files add theirs from init functions, in the
// order they should run within a round.
func register(b Bench) {
	for _, r := range registry {
		if r.ID() == b.ID() {
			panic("bench: duplicate benchmark " + b.ID())
		}
	}
	registry = append(registry, b)
}

// selectBenches picks the benchmarks named by -only (comma-separated; empty
// = all). A name matches a benchmark's name with its labels ("page /admin
// load=engine"), its name (every variant) or its first word (the family).
func selectBenches(only string) ([]Bench, error) {
	if strings.TrimSpace(only) == "" {
		return registry, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = false
		}
	}
	var out []Bench
	for _, b := range registry {
		first, _, _ := strings.Cut(b.Name, " ")
		hit := false
		for _, n := range []string{b.ID(), b.Name, first} {
			if _, ok := want[n]; ok {
				want[n] = true
				hit = true
			}
		}
		if hit {
			out = append(out, b)
		}
	}
	var unknown []string
	for n, used := range want {
		if !used {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown benchmark(s) %s; known: %s", strings.Join(unknown, ", "), strings.Join(benchNames(), ", "))
	}
	return out, nil
}

// benchNames lists the distinct names (variants share one).
func benchNames() []string {
	var names []string
	for _, b := range registry {
		if !slices.Contains(names, b.Name) {
			names = append(names, b.Name)
		}
	}
	return names
}

// ID is the benchmark's identity in the registry and its results: the name
// and, when set, the labels.
func (b Bench) ID() string {
	if b.Labels == "" {
		return b.Name
	}
	return b.Name + " " + b.Labels
}

func (b Bench) systems() []string {
	if len(b.Systems) == 0 {
		return []string{"jejak"}
	}
	return b.Systems
}

// summaryLine aggregates the rounds of one benchmark on one system: the
// median of every metric, plus min, max and per-round values of the primary.
// labels ("k=v k=v", may be empty) follow system=.
func summaryLine(name, labels, system string, rounds []Result) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "BENCH %s system=%s", name, system)
	if labels != "" {
		sb.WriteString(" " + labels)
	}
	if len(rounds) == 0 {
		return sb.String()
	}
	keys := make([]string, 0, len(rounds[0].Metrics))
	for _, m := range rounds[0].Metrics {
		keys = append(keys, m.Key)
	}
	for _, k := range keys {
		fmt.Fprintf(&sb, " %s=%s", k, formatValue(k, median(values(rounds, k))))
	}
	primary := keys[0]
	vs := values(rounds, primary)
	lo, hi := math.Inf(1), math.Inf(-1)
	strs := make([]string, len(vs))
	for i, v := range vs {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
		strs[i] = formatValue(primary, v)
	}
	fmt.Fprintf(&sb, " min=%s max=%s rounds=%d values=%s", formatValue(primary, lo), formatValue(primary, hi), len(rounds), strings.Join(strs, ","))
	if loads := loadValues(rounds); loads != "" {
		sb.WriteString(" load1=" + loads)
	}
	return sb.String()
}

// loadValues is the load average each round started at, in the order of
// values= ("" when any is unknown).
func loadValues(rounds []Result) string {
	strs := make([]string, len(rounds))
	for i, r := range rounds {
		if !r.LoadKnown {
			return ""
		}
		strs[i] = formatLoad(r.Load1)
	}
	return strings.Join(strs, ",")
}

func values(rounds []Result, key string) []float64 {
	var out []float64
	for _, r := range rounds {
		if v, ok := r.Get(key); ok {
			out = append(out, v)
		}
	}
	return out
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile returns the nearest-rank percentile p (0–100) of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func formatValue(key string, v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case strings.HasSuffix(key, "_ms"), key == "seconds":
		return strconv.FormatFloat(v, 'f', 2, 64)
	case strings.HasSuffix(key, "_per_sec"):
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
}

// variantLine compares the variants of one benchmark (same name, different
// labels) on their primary metric's median, each relative to the first
// variant: "# tenants burndown system=jejak jobs_per_sec relative to
// tenants=10: tenants=1000 0.97×; tenants=10000 0.91×", each followed, when
// the variant and its base share more than one round, by the ratios within
// each round and their median. It returns "" when
// fewer than two variants have results.
func variantLine(name, system string, labels []string, rounds [][]Result) string {
	var base []Result
	var baseLabel, primary string
	var parts []string
	for i, rs := range rounds {
		if len(rs) == 0 || len(rs[0].Metrics) == 0 {
			continue
		}
		key := rs[0].Metrics[0].Key
		if primary == "" {
			primary, base, baseLabel = key, rs, labels[i]
			continue
		}
		b := median(values(base, primary))
		if key != primary || b == 0 {
			continue
		}
		part := fmt.Sprintf("%s %.2f×", labels[i], median(values(rs, key))/b)
		if paired := pairedRatios(base, rs, key); len(paired) > 1 {
			each := make([]string, len(paired))
			for j, v := range paired {
				each[j] = fmt.Sprintf("%.2f", v)
			}
			part += fmt.Sprintf(" (by round %s; median %.2f)", strings.Join(each, ", "), median(paired))
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("# %s system=%s %s relative to %s: %s", name, system, primary, baseLabel, strings.Join(parts, "; "))
}

// pairedRatios is key of each of rs over that of base in the same round,
// for the rounds both have, in round order.
func pairedRatios(base, rs []Result, key string) []float64 {
	byRound := map[int]float64{}
	for _, r := range base {
		if v, ok := r.Get(key); ok && r.Round > 0 && v != 0 {
			byRound[r.Round] = v
		}
	}
	var out []float64
	for _, r := range rs {
		if v, ok := r.Get(key); ok && r.Round > 0 {
			if b, ok := byRound[r.Round]; ok {
				out = append(out, v/b)
			}
		}
	}
	return out
}
