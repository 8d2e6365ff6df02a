// Package browsertest starts a real headless Chromium for dashboard tests.
// A missing Chromium fails the test: it is never a reason to skip. The one
// skip is asked for by name, JEJAK_SKIP_BROWSER=1 (make check, the inner
// loop), and refused under CI=true, where every browser test runs.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// New returns a browser tab context that lives until t ends. On failure a
// screenshot of the current page is saved to a temporary folder and its
// path logged.
func New(t *testing.T) context.Context {
	t.Helper()
	switch skip, reason := skipWanted(os.Getenv); {
	case skip:
		t.Skip(reason)
	case reason != "":
		t.Fatal(reason)
	}
	execPath := findChromium()
	if execPath == "" {
		t.Fatal("browser tests need Chromium (apt-get install chromium); none found on PATH")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(execPath),
		chromedp.UserDataDir(t.TempDir()),
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
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	// A hung browser must not hang the suite, but a walk over many pages
	// on a loaded machine may take minutes: the tab lives until shortly
	// before the test binary's own deadline (go test -timeout), so the
	// test fails with a screenshot instead of the binary panicking.
	ctx, cancelTimeout := context.WithDeadline(ctx, tabDeadline(t))
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			Screenshot(t, ctx, "failure")
		}
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	return ctx
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
