// Package pgcluster runs Jejak's embedded default database: a private
// PostgreSQL cluster under a directory of its own, built from the PostgreSQL
// binaries installed on the machine. It listens on 127.0.0.1 at a free port
// (never a Unix socket, whose path length depends on the checkout's folder),
// so it never clashes with a server already on 5432.
package pgcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries says that no PostgreSQL server binaries were found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl) not found: install them, e.g. `apt-get install postgresql`, or set JEJAK_PG_BIN, or set DATABASE_URL to use an existing server")

// Cluster is a running embedded PostgreSQL cluster.
type Cluster struct {
	Dir    string // data directory
	BinDir string
	Port   int
	// Database is the database Jejak uses inside the cluster.
	Database string
	// started is true when this process started the server (and so stops it).
	started bool
	// settings are the server's extra "name=value" settings, given again
	// on a restart.
	settings []string
}

// URL is the connection string of the cluster's Jejak database.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, c.Database)
}

// Start initialises the cluster in dir on first use, starts it unless it is
// already running (then it is reused, with the settings it was started
// with), and creates the named database. settings ("name=value") are
// given to the server when Start starts it. A lock file beside dir
// serialises concurrent callers, such as the test binaries of several
// packages.
func Start(ctx context.Context, dir, database string, settings ...string) (*Cluster, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("create cluster parent: %w", err)
	}
	unlock, err := lockFile(dir + ".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()

	c := &Cluster{Dir: dir, BinDir: bin, Database: database, settings: settings}
	if err := c.ensureReachable(ctx); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := c.initdb(ctx); err != nil {
			return nil, err
		}
	}
	if port, ok := c.runningPort(ctx); ok {
		c.Port = port
	} else {
		// The server is ours to stop from here: pg_ctl cut short while it
		// waits for the server (ctx ended: a signal during start-up) has
		// already started one, which would outlive us.
		c.started = true
		if err := c.start(ctx); err != nil {
			return nil, c.abandon(err)
		}
	}
	if err := c.ensureDatabase(ctx); err != nil {
		return nil, c.abandon(err)
	}
	return c, nil
}

// abandon stops the server if Start started it, and returns err, why Start
// gives up: a start that fails half-way leaves no server behind. The stop
// has a deadline of its own, as ctx's end may be why Start gives up.
func (c *Cluster) abandon(err error) error {
	if !c.started {
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if serr := c.Stop(sctx); serr != nil {
		if _, running := c.runningPort(sctx); running {
			return errors.Join(err, fmt.Errorf("stop the server this start left running: %w", serr))
		}
	}
	return err
}

// stopTimeout bounds stopping a server whose start failed.
const stopTimeout = 30 * time.Second

// Stop shuts the server down (fast mode: sessions are ended, data is safe)
// if this process started it.
func (c *Cluster) Stop(ctx context.Context) error {
	if !c.started {
		return nil
	}
	return c.run(ctx, filepath.Join(c.BinDir, "pg_ctl"), "stop", "-D", c.Dir, "-m", "fast", "-w")
}

func (c *Cluster) initdb(ctx context.Context) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if err := c.chownForPostgres(c.Dir); err != nil {
		return err
	}
	// Trust auth is safe here: the server only listens on 127.0.0.1 and
	// exists for local development and tests.
	return c.run(ctx, filepath.Join(c.BinDir, "initdb"), "-D", c.Dir, "--username=postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-instructions")
}

func (c *Cluster) start(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	c.Port = port
	return c.pgCtlStart(ctx)
}

// pgCtlStart starts the server on c.Port with c.settings after the
// defaults (a later -c wins).
func (c *Cluster) pgCtlStart(ctx context.Context) error {
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c max_connections=200", c.Port)
	for _, s := range c.settings {
		opts += " -c " + s
	}
	return c.run(ctx, filepath.Join(c.BinDir, "pg_ctl"), "start", "-D", c.Dir, "-w", "-t", "60",
		"-l", filepath.Join(c.Dir, "server.log"), "-o", opts)
}

// runningPort reports the port of a server already running on the data dir.
func (c *Cluster) runningPort(ctx context.Context) (int, bool) {
	if err := c.run(ctx, filepath.Join(c.BinDir, "pg_ctl"), "status", "-D", c.Dir); err != nil {
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join(c.Dir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return 0, false
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	return port, err == nil
}

func (c *Cluster) ensureDatabase(ctx context.Context) error {
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect to embedded cluster: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", c.Database).Scan(&exists); err != nil {
		return fmt.Errorf("look up database: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{c.Database}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", c.Database, err)
	}
	return nil
}

// run executes a PostgreSQL binary, as the postgres OS user when we are root
// (initdb and postgres refuse to run as root).
func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, name, args...)
	}
	// The server must outlive a Ctrl-C aimed at us: we stop it ourselves.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(name), args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (c *Cluster) chownForPostgres(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root needs a 'postgres' OS user to own the cluster: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("chown data dir: %w", err)
	}
	return nil
}

// ensureReachable handles running as root in a checkout the postgres OS
// user cannot reach (say, under /root): the server could not open its own
// data directory. The cluster then lives under /var/lib/jejak and the
// requested path becomes a symbolic link to it, so it is still found there.
func (c *Cluster) ensureReachable(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if fi, err := os.Lstat(c.Dir); err == nil {
		if fi.Mode()&os.ModeSymlink != 0 { // the link of an earlier run
			target, err := filepath.EvalSymlinks(c.Dir)
			if err != nil {
				return fmt.Errorf("resolve %s: %w", c.Dir, err)
			}
			c.Dir = target
		}
		return nil
	}
	parent := filepath.Dir(c.Dir)
	if err := exec.CommandContext(ctx, "runuser", "-u", "postgres", "--", "test", "-x", parent).Run(); err == nil {
		return nil
	}
	sum := sha256.Sum256([]byte(c.Dir))
	alt := filepath.Join("/var/lib/jejak/clusters", hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(filepath.Dir(alt), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(alt), err)
	}
	if err := os.Symlink(alt, c.Dir); err != nil {
		return fmt.Errorf("link %s to %s: %w", c.Dir, alt, err)
	}
	fmt.Fprintf(os.Stderr, "pgcluster: the postgres user cannot reach %s; the cluster lives in %s (linked from %s)\n", parent, alt, c.Dir)
	c.Dir = alt
	return nil
}

// findBinDir picks the newest /usr/lib/postgresql/N/bin, or JEJAK_PG_BIN, or
// the directory of initdb on PATH.
func findBinDir() (string, error) {
	if d := os.Getenv("JEJAK_PG_BIN"); d != "" {
		return d, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(matches, func(i, j int) bool { return pgMajor(matches[i]) > pgMajor(matches[j]) })
	if len(matches) > 0 {
		return filepath.Dir(matches[0]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrNoBinaries
}

func pgMajor(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// Restart stops the server the way a crash would (immediate mode: no
// shutdown checkpoint, sessions cut) and starts it again on the same port.
// Only for a cluster this process started (the chaos suite's own).
func (c *Cluster) Restart(ctx context.Context) error {
	if !c.started {
		return errors.New("restart: this process did not start the cluster")
	}
	if err := c.run(ctx, filepath.Join(c.BinDir, "pg_ctl"), "stop", "-D", c.Dir, "-m", "immediate", "-w"); err != nil {
		return err
	}
	return c.pgCtlStart(ctx)
}
