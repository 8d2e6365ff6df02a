package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// counters is what the HTTP benchmarks read at both ends of a window: CPU
// time of the web process and of PostgreSQL's backends serving its
// database, and the statements (or transactions) run in it.
type counters struct {
	webCPU time.Duration
	// pgByPid is each backend's CPU time so far, by process id.
	pgByPid    map[int]time.Duration
	pgCPU      time.Duration // filled by sub
	statements int64
	// benchCPU is this process's (its JetStream server and its polls of
	// the database run in it); machine, the machine's CPU time.
	benchCPU time.Duration
	machine  machineTicks
}

// sub is the difference c - before. A backend present at both ends counts
// its growth; one that started inside the window counts all of its CPU
// (its start-up included); one that ended inside the window is lost.
func (c counters) sub(before counters) counters {
	d := counters{webCPU: c.webCPU - before.webCPU, statements: c.statements - before.statements,
		benchCPU: c.benchCPU - before.benchCPU,
		machine:  machineTicks{idle: c.machine.idle - before.machine.idle, total: c.machine.total - before.machine.total}}
	for pid, t := range c.pgByPid {
		if b, ok := before.pgByPid[pid]; ok && b <= t {
			d.pgCPU += t - b
		} else if !ok {
			d.pgCPU += t
		}
	}
	return d
}

// counters reads the web process's CPU, its database's backends' CPU and
// the statement (or transaction) count.
func (s *httpServer) counters(ctx context.Context) (counters, error) {
	return readCounters(ctx, s.admin, s.statements, s.web)
}

// readCounters reads the CPU of procs (summed, in webCPU), that of the
// backends serving admin's database (the processes pg_stat_activity lists
// for it, admin's own left out), the statement (or transaction) count, and
// this process's and the machine's CPU time.
func readCounters(ctx context.Context, admin querier, statements bool, procs ...*replica) (counters, error) {
	var c counters
	var err error
	if c.benchCPU, err = processCPU(os.Getpid()); err != nil {
		return c, fmt.Errorf("own CPU: %w", err)
	}
	if c.machine, err = readMachineTicks(); err != nil {
		return c, err
	}
	for _, p := range procs {
		t, err := processCPU(p.cmd.Process.Pid)
		if err != nil {
			return c, fmt.Errorf("process CPU: %w", err)
		}
		c.webCPU += t
	}
	if c.pgByPid, err = backendCPU(ctx, admin); err != nil {
		return c, err
	}
	c.statements, err = statementCount(ctx, admin, statements)
	return c, err
}

// querier is what the counters read through: a connection or a pool of
// the benchmark's superuser.
type querier interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}

// statementCount is the statements run so far in admin's database, from
// pg_stat_statements when statements says it answers, else its
// transactions from pg_stat_database.
func statementCount(ctx context.Context, admin querier, statements bool) (int64, error) {
	q := `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`
	if statements {
		q = `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`
	}
	var n int64
	if err := admin.QueryRow(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("count statements: %w", err)
	}
	return n, nil
}

// statementsMetric names the per-unit count statementCount measured:
// stmts_per_UNIT, or xact_per_UNIT where it counted transactions.
func statementsMetric(statements bool, unit string) string {
	if statements {
		return "stmts_per_" + unit
	}
	return "xact_per_" + unit
}

// backendCPU is the CPU time so far of each backend serving admin's
// database (pg_stat_activity's list, admin's own connection left out).
func backendCPU(ctx context.Context, admin querier) (map[int]time.Duration, error) {
	rows, err := admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return nil, fmt.Errorf("list backends: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("list backends: %w", err)
	}
	out := map[int]time.Duration{}
	for _, pid := range pids {
		// A backend that exited between the list and the read is skipped.
		if t, err := processCPU(int(pid)); err == nil {
			out[int(pid)] = t
		}
	}
	return out, nil
}

// processCPU is a process's user + system CPU time from /proc/PID/stat.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	ticks, err := statCPUTicks(string(b))
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ticks) * time.Second / time.Duration(clockTicks()), nil
}

// statCPUTicks reads utime + stime (fields 14 and 15, in clock ticks) from
// the text of /proc/PID/stat. The command name (field 2) is in parentheses
// and may itself hold spaces and parentheses, so fields are counted from
// the last ')'.
func statCPUTicks(stat string) (int64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("utime %q stime %q are not numbers", f[11], f[12])
	}
	return utime + stime, nil
}

var (
	ticksOnce sync.Once
	ticks     int64
)

// clockTicks is the kernel's USER_HZ (getconf CLK_TCK), 100 when it
// cannot be read (every mainstream Linux build).
func clockTicks() int64 {
	ticksOnce.Do(func() {
		ticks = 100
		if out, err := exec.Command("getconf", "CLK_TCK").Output(); err == nil {
			if v, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil && v > 0 {
				ticks = v
			}
		}
	})
	return ticks
}

// machineTicks is the machine's CPU time so far from /proc/stat, in clock
// ticks of all cores: idle (idle and iowait) and total.
type machineTicks struct{ idle, total int64 }

// readMachineTicks reads machineTicks from /proc/stat.
func readMachineTicks() (machineTicks, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTicks{}, err
	}
	return parseMachineTicks(string(b))
}

// parseMachineTicks reads the "cpu" line (all cores) of /proc/stat's text.
func parseMachineTicks(stat string) (machineTicks, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return machineTicks{}, fmt.Errorf("/proc/stat: first line %q is not the cpu line", line)
	}
	var m machineTicks
	// user nice system idle iowait irq softirq steal (guest time is
	// counted in user already).
	for i, s := range f[1:min(len(f), 9)] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return machineTicks{}, fmt.Errorf("/proc/stat: %w", err)
		}
		m.total += v
		if i == 3 || i == 4 {
			m.idle += v
		}
	}
	return m, nil
}

// idleShare is the share of m (a difference of two readings) that was
// idle.
func (m machineTicks) idleShare() float64 {
	if m.total <= 0 {
		return 0
	}
	return float64(m.idle) / float64(m.total)
}
