// Package browsertest starts a real headless Chromium for dashboard tests.
// A missing Chromium fails the test: it is never a reason to skip. The one
// skip is asked for by name, JEJAK_SKIP_BROWSER=1 (make check, the inner
// loop), and refused under CI=true, where every browser test runs.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// New returns a browser tab context that lives until t ends. Every tab of
// a test binary is a tab of one shared Chromium (starting one per test was
// a large part of the browser tests' time on a loaded machine), in a
// browser context of its own: cookies, storage and cache are not shared
// between tests. On failure a screenshot of the current page is saved to a
// temporary folder and its path logged.
func New(t *testing.T) context.Context {
	t.Helper()
	switch skip, reason := skipWanted(os.Getenv); {
	case skip:
		t.Skip(reason)
	case reason != "":
		t.Fatal(reason)
	}
	browser, err := shared()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancelCtx := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	// A hung browser must not hang the suite, but a walk over many pages
	// on a loaded machine may take minutes: the tab lives until shortly
	// before the test binary's own deadline (go test -timeout), so the
	// test fails with a screenshot instead of the binary panicking.
	ctx, cancelTimeout := context.WithDeadline(ctx, tabDeadline(t))
	// The window size of the browser's own first tab, for every tab.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		cancelTimeout()
		cancelCtx()
		t.Fatalf("open a chromium tab: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			Screenshot(t, ctx, "failure")
		}
		cancelTimeout()
		cancelCtx()
	})
	return ctx
}

var (
	browserOnce sync.Once
	browserCtx  context.Context
	browserErr  error
)

// shared starts the test binary's Chromium on first use. It is never
// stopped by hand: the kernel kills it when the test binary exits
// (chromedp starts it with Pdeathsig).
func shared() (context.Context, error) {
	browserOnce.Do(func() {
		execPath := findChromium()
		if execPath == "" {
			browserErr = errors.New("browser tests need Chromium (apt-get install chromium); none found on PATH")
			return
		}
		dir, err := profileDir()
		if err != nil {
			browserErr = err
			return
		}
		opts := []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(execPath),
			chromedp.UserDataDir(dir),
			chromedp.Headless,
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.NoFirstRun,
			chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.WindowSize(1280, 900),
		}
		actx, _ := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, _ := chromedp.NewContext(actx)
		if err := chromedp.Do(bctx); err != nil {
			browserErr = fmt.Errorf("start chromium: %w", err)
			return
		}
		browserCtx = bctx
	})
	return browserCtx, browserErr
}

// profileDir makes the shared browser's profile folder, named after this
// process, and removes those of test binaries that have exited (their
// browser was killed with them, so nothing else removed the folder).
func profileDir() (string, error) {
	prefix := filepath.Join(os.TempDir(), "jejak-browsertest-")
	old, _ := filepath.Glob(prefix + "*")
	for _, d := range old {
		pid, err := strconv.Atoi(strings.TrimPrefix(d, prefix))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue // still running
		}
		_ = os.RemoveAll(d)
	}
	dir := prefix + strconv.Itoa(os.Getpid())
	return dir, os.MkdirAll(dir, 0o700)
}

// Screenshot saves a full-page PNG of the current tab into a temporary
// folder that outlives the test and logs its path.
func Screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "jejak-screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("screenshot dir: %v", err)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	path := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()+"-"+name)+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Logf("write screenshot: %v", err)
		return
	}
	t.Logf("screenshot saved: %s", path)
}

// tabDeadline is when a tab of t gives up: a minute before the test
// binary's deadline (time for the failure screenshot and cleanup), or in
// an hour when the binary has none.
func tabDeadline(t *testing.T) time.Time {
	if d, ok := t.Deadline(); ok {
		return d.Add(-time.Minute)
	}
	return time.Now().Add(time.Hour) //nolint:forbidigo // a hang guard, not domain time
}

// SkipEnv is the variable make check sets to leave browser tests out.
const SkipEnv = "JEJAK_SKIP_BROWSER"

// skipWanted says whether the environment asks to skip browser tests (why,
// for the log); a reason without skip is a refusal that fails the test:
// CI runs every browser test, whatever else is set.
func skipWanted(getenv func(string) string) (skip bool, reason string) {
	if getenv(SkipEnv) != "1" {
		return false, ""
	}
	if ci := getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		return false, SkipEnv + "=1 under CI=" + ci + ": CI runs every browser test; unset " + SkipEnv
	}
	return true, SkipEnv + "=1 (make check): browser test left to make test"
}

func findChromium() string {
	if p := os.Getenv("JEJAK_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// htmxIdle holds when no element is waiting for an htmx answer, swapping or
// settling: new content has been processed, so a click reaches htmx and not
// the browser's plain form submission.
const htmxIdle = `!document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')`

// Wait polls the JavaScript condition js until it holds and htmx is idle,
// failing t (with what) after 15 seconds.
func Wait(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool]("("+js+") && "+htmxIdle)); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
