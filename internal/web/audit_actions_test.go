package web

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/i18n"
)

// actionCode is what a literal must look like to be read as an action.
var actionCode = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z0-9_-]+)+$`)

// writerCalls are the helpers through which the code records an event
// with the action as a literal argument (tenant, member, webhook, approval
// and token services: record; payment: event; the demo story: act, system).
var writerCalls = map[string]bool{"record": true, "event": true, "act": true, "system": true}

// writtenActions scans the product's Go source (tests left out) for the
// action codes it writes: Action: "…" fields, action := "…" variables,
// literals passed to the writer helpers, and "prefix." + stage builds
// (returned apart, as prefixes).
func writtenActions(t *testing.T) (codes, prefixes map[string]string) {
	t.Helper()
	codes, prefixes = map[string]string{}, map[string]string{}
	fset := token.NewFileSet()
	lit := func(e ast.Expr) (string, bool) {
		b, ok := e.(*ast.BasicLit)
		if !ok || b.Kind != token.STRING {
			return "", false
		}
		v, err := strconv.Unquote(b.Value)
		return v, err == nil
	}
	add := func(e ast.Expr, at token.Pos) {
		if v, ok := lit(e); ok && actionCode.MatchString(v) {
			codes[v] = fset.Position(at).String()
		}
	}
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") ||
			strings.Contains(p, "queries"+string(filepath.Separator)) || strings.Contains(p, "i18n"+string(filepath.Separator)) {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Action" {
					add(n.Value, n.Pos())
				}
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					if id, ok := l.(*ast.Ident); ok && id.Name == "action" && i < len(n.Rhs) {
						add(n.Rhs[i], n.Pos())
					}
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && writerCalls[sel.Sel.Name] {
					for _, a := range n.Args {
						add(a, n.Pos())
						if b, ok := a.(*ast.BinaryExpr); ok && b.Op == token.ADD {
							if v, ok := lit(b.X); ok && strings.HasSuffix(v, ".") {
								prefixes[v] = fset.Position(n.Pos()).String()
							}
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return codes, prefixes
}

// TestEveryActionHasASentence: every action code the product writes (read
// from its source) is in the audit domain's registry, and every registered
// action has a sentence in English and Indonesian that renders without a
// formatting error, whatever its detail holds.
func TestEveryActionHasASentence(t *testing.T) {
	codes, prefixes := writtenActions(t)
	// The scan must see the writers it is meant to see.
	for _, want := range []string{"project.delete", "points.awarded", "staff.viewed_audit", "webhook.endpoint.enable",
		"payment.refunded", "member.access_disabled", "auth.signin_failed", "report.sent", "approval.requested"} {
		if _, ok := codes[want]; !ok {
			t.Errorf("the source scan did not find %s; is it stale?", want)
		}
	}
	for code, at := range codes {
		if !audit.KnownAction(code) {
			t.Errorf("%s writes action %q, which audit.Actions does not list", at, code)
		}
	}
	for prefix, at := range prefixes {
		n := 0
		for _, a := range audit.Actions() {
			if strings.HasPrefix(a, prefix) {
				n++
			}
		}
		if n == 0 {
			t.Errorf("%s builds actions %q…, none of which audit.Actions lists", at, prefix)
		}
	}
	cats := i18n.Catalogs()
	for _, a := range audit.Actions() {
		for _, lang := range []string{i18n.EN, i18n.ID} {
			if cats[lang]["event."+a] == "" {
				t.Errorf("action %s has no sentence in %s (event.%s)", a, lang, a)
				continue
			}
			ctx := i18n.WithLang(context.Background(), lang)
			for _, detail := range []string{`{}`, `{"name": "N", "reason": "R", "kind": "k", "attempt": 1, "messages": 1, "points": 1, "recipients": 2}`} {
				e := audit.Recorded{Event: audit.Event{ActorKind: audit.ActorSystem, Action: a, Entity: "x", EntityID: "1", Detail: []byte(detail)}}
				segs := sentence(ctx, e, "")
				var text strings.Builder
				for _, s := range segs {
					text.WriteString(s.Text)
				}
				if len(segs) == 0 || strings.Contains(text.String(), "%!") {
					t.Errorf("action %s in %s renders %q", a, lang, text.String())
				}
			}
		}
	}
	if !slices.Contains(audit.Actions(), "job.rescued") {
		t.Error("the job stages are not registered")
	}
}
