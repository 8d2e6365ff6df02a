package browsertest

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// axeSource is axe-core (testdata/README.md has its version and checksum),
// injected into pages by the tests only.
//
//go:embed testdata/axe.min.js
var axeSource string

// AxeViolation is one accessibility rule a page breaks, as axe reports it.
type AxeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// Axe runs axe-core (WCAG 2.x A and AA rules plus best practices) on the
// current page, logs every violation, and returns them.
func Axe(t *testing.T, ctx context.Context, page string) []AxeViolation {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	loaded, _ := chromedp.Run(actx, chromedp.Evaluate[bool](`typeof axe === "object"`))
	if !loaded {
		if _, err := chromedp.Run(actx, chromedp.Evaluate[Void](axeSource+"\n;true")); err != nil {
			t.Fatalf("inject axe into %s: %v", page, err)
		}
	}
	raw, err := chromedp.Run(actx, chromedp.Evaluate[[]byte](
		`axe.run(document, {resultTypes: ["violations"], runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]}}).then(r => r.violations)`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("run axe on %s: %v", page, err)
	}
	var vs []AxeViolation
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatalf("axe results of %s: %v", page, err)
	}
	if len(vs) == 0 {
		t.Logf("axe %s: no violations", page)
	}
	for _, v := range vs {
		var where []string
		for i, n := range v.Nodes {
			if i == 3 {
				where = append(where, fmt.Sprintf("… %d more", len(v.Nodes)-3))
				break
			}
			where = append(where, fmt.Sprint(n.Target...))
		}
		t.Logf("axe %s: %s [%s] %s (%d nodes: %s)", page, v.ID, v.Impact, v.Help, len(v.Nodes), strings.Join(where, "; "))
	}
	return vs
}

// AxeClean runs Axe and fails t on any serious or critical violation.
func AxeClean(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	for _, v := range Axe(t, ctx, page) {
		if v.Impact == "serious" || v.Impact == "critical" {
			t.Errorf("axe %s: %s violation %s: %s", page, v.Impact, v.ID, v.Help)
		}
	}
}

// Void is chromedp's "no result" type, re-exported so callers need not
// import chromedp for it.
type Void = chromedp.Void
