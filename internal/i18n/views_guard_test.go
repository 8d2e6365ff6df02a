package i18n

import (
	"fmt"
	"go/scanner"
	"go/token"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/a-h/templ/parser/v2"
)

// TestViewsHaveNoUntranslatedText parses every views/**/*.templ with templ's
// own parser and fails on text a reader would see that does not come from
// the catalogs:
//
//   - a text node with a letter in it (<h1>Jobs</h1>);
//   - a constant placeholder, title, aria-label, alt or
//     aria-description attribute with a letter in it;
//   - a Go string literal with a letter in it printed as content
//     ({ "Retry" }) or as one of those attributes ({ "Reason for " + x }),
//     unless it is the key passed to i18n.T / i18n.In / i18n.Enum;
//   - a Go string literal that reads like words (starts with a capital
//     letter, or has a space between letters), outside i18n's key
//     position, in the arguments of a component call
//     (@layout.Base(layout.Page{Title: "Jobs"}), @table(rows, "No rows."))
//     and in the Go code of the views (helpers building sentences).
//
// Data (names, ids, kinds) reaches the page through expressions of the view
// model and is not text of ours; a code in a literal (a CSS class, a test id,
// a URL, a state in a form value) is lower-case without spaces, so the
// rules above do not see it. allowedText lists the rest, with the reason.
func TestViewsHaveNoUntranslatedText(t *testing.T) {
	var problems []string
	report := func(pos string, what, text string) {
		problems = append(problems, fmt.Sprintf("%s: %s %q", pos, what, text))
	}
	templs, gos := viewSources(t)
	if len(templs) < 15 {
		t.Fatalf("found only %d .templ files; is the walk stale?", len(templs))
	}
	for _, f := range templs {
		tf, err := parser.Parse(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		w := &textWalker{file: f, report: report}
		for _, n := range tf.Nodes {
			switch n := n.(type) {
			case *parser.HTMLTemplate:
				w.nodes(n.Children)
			case *parser.TemplateFileGoExpression:
				w.goCode(int(n.Expression.Range.From.Line), n.Expression.Value)
			}
		}
	}
	for _, f := range gos {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		w := &textWalker{file: f, report: report}
		w.goCode(0, string(b))
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Logf("%d untranslated texts: put them in catalog_en.go and catalog_id.go and print them with i18n.T(ctx, key, args...)", len(problems))
	}
}

// allowedText is text the same in both languages, removed before a text is
// checked for letters.
var allowedText = []string{
	"Jejak",      // the product's name
	"UTC",        // a time zone's name
	"SHA-256",    // an algorithm's name
	"CSV",        // file formats' names (the export links)
	"JSON Lines", //
	"X-Trace-Id", // HTTP header names, spelled as the protocol spells them
	"webhook-id",
	"webhook-timestamp",
	"webhook-signature",
	"Rp", // the rupiah's symbol
}

// codeExamples are placeholders that show a code as typed (a job kind, a
// queue name): the engine's identifiers, the same in both languages.
var codeExamples = map[string]bool{"email.weekly-report": true, "payment.charge": true, "default": true}

// markupRE matches a tag in a Go string that writes HTML (its element and
// attribute names are not text); urlRE an example URL in a placeholder.
var (
	markupRE = regexp.MustCompile(`<[^>]*(>|$)`)
	urlRE    = regexp.MustCompile(`https?://\S+`)
)

// attrRE matches an attribute and its quoted value in a Go string that
// writes part of a tag (a hand-written component appends a tag in pieces,
// `" hx-swap="outerHTML" hx-confirm="`); the value may run on into the next
// piece.
var attrRE = regexp.MustCompile(`(^|\s)([a-zA-Z_:][-a-zA-Z0-9_:.]*)="[^"<>]*("|$)`)

// strip removes what is the same in both languages from s.
func strip(s string) string {
	for _, a := range allowedText {
		s = strings.ReplaceAll(s, a, "")
	}
	s = markupRE.ReplaceAllString(s, "")
	// A text attribute's value is read to people: it stays.
	s = attrRE.ReplaceAllStringFunc(s, func(a string) string {
		if textAttrs[attrRE.FindStringSubmatch(a)[2]] {
			return a
		}
		return ""
	})
	s = urlRE.ReplaceAllString(s, "")
	s = unitRE.ReplaceAllString(s, "")
	return verbRE.ReplaceAllString(s, "")
}

// unitRE matches a figure with an SI unit symbol (s, min, h, d are the
// symbols the SI accepts for second, minute, hour and day; both languages
// write them so). Format verbs count as figures.
var unitRE = regexp.MustCompile(`(%[-+# 0-9.]*[dfsv]|\d+(\.\d+)?)\s*(s|min|h|d)\b`)

// verbRE matches a format verb (its letter is not text).
var verbRE = regexp.MustCompile(`%(\[\d+\])?[-+# 0-9.]*[a-zA-Z%]`)

func viewSources(t *testing.T) (templs, gos []string) {
	err := filepath.Walk("../../views", func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(p, ".templ"):
			templs = append(templs, p)
		case strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_templ.go") && !strings.HasSuffix(p, "_test.go"):
			gos = append(gos, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return templs, gos
}

func hasLetter(s string) bool { return strings.IndexFunc(strip(s), unicode.IsLetter) >= 0 }

// wordyRE: a literal that reads like words rather than a code: two letters
// with a space (and maybe punctuation) between them, or a capital letter followed by a letter (a
// lone capital is an SVG path command, "M" or "L").
var wordyRE = regexp.MustCompile(`\pL[\s\p{P}]*\s[\s\p{P}]*\pL|^\s*\p{Lu}\pL`)

func wordy(s string) bool { return wordyRE.MatchString(strip(s)) }

// textAttrs are the attributes whose value is read to people.
var textAttrs = map[string]bool{"placeholder": true, "title": true, "aria-label": true, "alt": true, "aria-description": true}

type textWalker struct {
	file   string
	report func(pos, what, text string)
}

func (w *textWalker) pos(r parser.Range) string {
	return fmt.Sprintf("%s:%d", w.file, r.From.Line+1)
}

func (w *textWalker) nodes(ns []parser.Node) {
	for _, n := range ns {
		w.node(n)
	}
}

func (w *textWalker) node(n parser.Node) {
	switch n := n.(type) {
	case *parser.Text:
		if v := html.UnescapeString(n.Value); hasLetter(v) {
			w.report(w.pos(n.Range), "text", strings.TrimSpace(v))
		}
	case *parser.Element:
		w.attrs(n.Attributes)
		w.nodes(n.Children)
	case *parser.StringExpression:
		w.expr(n.Expression, "content", hasLetter)
	case *parser.TemplElementExpression:
		w.expr(n.Expression, "component argument", wordy)
		w.nodes(n.Children)
	case *parser.CallTemplateExpression:
		w.expr(n.Expression, "component argument", wordy)
	case *parser.IfExpression:
		w.nodes(n.Then)
		for _, e := range n.ElseIfs {
			w.nodes(e.Then)
		}
		w.nodes(n.Else)
	case *parser.SwitchExpression:
		for _, c := range n.Cases {
			w.nodes(c.Children)
		}
	case *parser.ForExpression:
		w.nodes(n.Children)
	case *parser.GoCode:
		w.expr(n.Expression, "Go code", wordy)
	}
}

func (w *textWalker) attrs(as []parser.Attribute) {
	for _, a := range as {
		switch a := a.(type) {
		case *parser.ConstantAttribute:
			if textAttrs[a.Key.String()] && !codeExamples[a.Value] && hasLetter(html.UnescapeString(a.Value)) {
				w.report(w.pos(a.Range), a.Key.String()+" attribute", a.Value)
			}
		case *parser.ExpressionAttribute:
			if textAttrs[a.Key.String()] {
				w.expr(a.Expression, a.Key.String()+" attribute", hasLetter)
			}
		case *parser.ConditionalAttribute:
			w.attrs(a.Then)
			w.attrs(a.Else)
		}
	}
}

func (w *textWalker) expr(e parser.Expression, what string, bad func(string) bool) {
	for _, lit := range untranslatedLiterals(e.Value) {
		if bad(lit.text) {
			w.report(fmt.Sprintf("%s:%d", w.file, int(e.Range.From.Line)+lit.line), what, lit.text)
		}
	}
}

func (w *textWalker) goCode(line int, src string) {
	for _, lit := range untranslatedLiterals(src) {
		if wordy(lit.text) {
			w.report(fmt.Sprintf("%s:%d", w.file, line+lit.line), "Go string", lit.text)
		}
	}
}

type literal struct {
	line int
	text string
}

// untranslatedLiterals returns the string literals of Go source src that
// are not a catalog key: the first string after i18n.T(ctx, / i18n.In(lang,
// / i18n.Enum(ctx, / i18n.Plural(ctx, / i18n.Count(ctx, (a key may be built: "state." + s), nor a struct tag.
func untranslatedLiterals(src string) []literal {
	var s scanner.Scanner
	fs := token.NewFileSet()
	file := fs.AddFile("", fs.Base(), len(src))
	s.Init(file, []byte(src), func(token.Position, string) {}, 0)
	var out []literal
	// recent holds the last few tokens, to see "T ( ctx ," before a key.
	type tok struct {
		t   token.Token
		lit string
	}
	var recent []tok
	inKey := 0 // >0 while inside the key argument of a translation call
	depth := 0
	for {
		pos, t, lit := s.Scan()
		if t == token.EOF {
			break
		}
		switch t {
		case token.LPAREN:
			depth++
		case token.RPAREN:
			depth--
		}
		if inKey > 0 && (t == token.COMMA || t == token.RPAREN) && depth < inKey {
			inKey = 0
		} else if inKey > 0 && t == token.COMMA && depth == inKey {
			inKey = 0
		}
		n := len(recent)
		if n >= 4 && recent[n-1].t == token.COMMA && recent[n-3].t == token.LPAREN && recent[n-4].t == token.IDENT &&
			(recent[n-4].lit == "T" || recent[n-4].lit == "In" || recent[n-4].lit == "Enum" ||
				recent[n-4].lit == "Plural" || recent[n-4].lit == "Count") {
			inKey = depth
		}
		if t == token.STRING && inKey == 0 {
			if v, err := strconv.Unquote(lit); err == nil {
				out = append(out, literal{line: fs.Position(pos).Line, text: v})
			}
		}
		recent = append(recent, tok{t, lit})
		if len(recent) > 8 {
			recent = recent[1:]
		}
	}
	return out
}

// TestGuardReadsTagPieces: a Go string writing part of a tag is markup
// unless it carries text: a title, or words after the tag.
func TestGuardReadsTagPieces(t *testing.T) {
	for s, want := range map[string]bool{
		`" hx-trigger="toggle once" hx-target="find .raw-body"`: false,
		`" class="muted small">`:                                false,
		`" role="group" aria-labelledby="`:                      false,
		`" title="Delete all">`:                                 true,
		`" aria-label="Open it`:                                 true,
		`" class="x">Show the numbers</a>`:                      true,
	} {
		if wordy(s) != want {
			t.Errorf("wordy(%q) = %v, want %v", s, !want, want)
		}
	}
}
