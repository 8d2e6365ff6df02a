package web_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/browsertest"
)

var newTokenField = regexp.MustCompile(`data-testid="new-token">(jat_[A-Za-z0-9_-]{43})<`)

// createToken creates a witness token as c (an owner or admin, signed in)
// on the trail page and returns it as shown once.
func createToken(t *testing.T, c *client, slug, name string) string {
	t.Helper()
	a := c.post("/t/"+slug+"/audit/tokens", c.withCSRF(url.Values{"name": {name}}), true)
	m := newTokenField.FindStringSubmatch(a.body)
	if a.status != http.StatusOK || m == nil {
		t.Fatalf("create token %q: %d %.500s", name, a.status, a.body)
	}
	return m[1]
}

// bearer GETs path with an Authorization header and no cookies.
func (f *fixture) bearer(path, authorization string) answer {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+path, nil)
	req.Header.Set("Authorization", authorization)
	return f.client().do(req)
}

// TestAuditTokenReadsTheLogAndNothingElse: an owner creates a witness
// token on the trail page; it is shown once and only its hash is stored.
// The token reads the log's endpoints without a session and nothing else
// (the trail page itself, another tenant's log); a malformed one is a
// 400, one the tenant does not have a 404, a revoked one a 401. Creation, use (once a
// minute, however many requests) and revocation are in the trail.
func TestAuditTokenReadsTheLogAndNothingElse(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.record(melati, nil, systemEvents(3, "report.sent")...)
	f.seal()
	owner := f.client()
	owner.login("budi@melati.test")

	page := owner.get("/t/" + melati + "/audit")
	if page.status != http.StatusOK || !strings.Contains(page.body, `data-testid="audit-tokens-box"`) {
		t.Fatalf("the trail page has no token section for the owner: %d", page.status)
	}
	if box := owner.get("/t/" + melati + "/audit/tokens"); box.status != http.StatusOK || !strings.Contains(box.body, `data-testid="tokens-none"`) {
		t.Fatalf("the owner's token section is not empty at first: %d", box.status)
	}
	token := createToken(t, owner, melati, "auditor cron")
	hash := sha256.Sum256([]byte(token))
	if n := f.count(`SELECT count(*) FROM audit_tokens WHERE token_hash = $1 AND name = 'auditor cron'`, hash[:]); n != 1 {
		t.Fatalf("%d tokens stored with the shown token's hash, want 1", n)
	}
	if n := f.count(`SELECT count(*) FROM audit_tokens t WHERE position($1::bytea IN t.token_hash) > 0`, []byte(token)); n != 0 {
		t.Fatal("the token itself is stored")
	}
	if again := owner.get("/t/" + melati + "/audit/tokens"); strings.Contains(again.body, token) || !strings.Contains(again.body, "auditor cron") {
		t.Fatal("the token section shows the token again, or does not list it by name")
	}

	// The token reads every log endpoint, without a session.
	auth := "Bearer " + token
	base := "/t/" + melati + "/audit/log/"
	for _, path := range []string{"checkpoint", "proof?seq=1", "entry?seq=1", "bundle?seq=1", "consistency?from=1&to=2"} {
		a := f.bearer(base+path, auth)
		if a.status != http.StatusOK {
			t.Errorf("token GET %s: %d %.200s", path, a.status, a.body)
		}
		if a.header.Get("Set-Cookie") != "" {
			t.Errorf("token GET %s set a cookie: %s", path, a.header.Get("Set-Cookie"))
		}
	}
	a := f.bearer(base+"checkpoint", auth)
	vkey := f.client().get("/audit/key").body
	if origin, _, _ := signedTree(t, vkey, a.body); origin != "jejak/audit/"+melati {
		t.Fatalf("the token read checkpoint of %q", origin)
	}

	// ...and nothing else: pages go to sign-in, another tenant's log is a
	// 404 like a tenant that does not exist.
	for _, path := range []string{"/t/" + melati + "/audit", "/t/" + melati + "/", "/t/" + melati + "/audit/export.jsonl", "/t/" + melati + "/jobs"} {
		if a := f.bearer(path, auth); a.status == http.StatusOK || strings.Contains(a.body, "report.sent") {
			t.Errorf("token GET %s: %d, want no page", path, a.status)
		}
	}
	for _, slug := range []string{"kopi-senja", "no-such-tenant"} {
		if a := f.bearer("/t/"+slug+"/audit/log/checkpoint", auth); a.status != http.StatusNotFound || strings.Contains(a.body, "jejak/audit/") {
			t.Errorf("token on %s's log: %d %.200s", slug, a.status, a.body)
		}
	}
	for _, bad := range []string{"Bearer nope", "Bearer " + token + "x", "Basic " + token, "Bearer", token} {
		if a := f.bearer(base+"checkpoint", bad); a.status != http.StatusBadRequest {
			t.Errorf("Authorization %q: %d, want 400", bad, a.status)
		}
	}
	// A token the tenant does not have: 404, as on a tenant that does
	// not exist.
	if a := f.bearer(base+"checkpoint", "Bearer jat_"+strings.Repeat("A", 43)); a.status != http.StatusNotFound {
		t.Errorf("unknown token: %d, want 404", a.status)
	}

	// Seven requests above, within a minute: one recorded use.
	tid := f.tenantID(melati)
	if n := f.count(`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'audit_token.use' AND detail->>'name' = 'auditor cron' AND detail ? 'ip'`, tid); n != 1 {
		t.Errorf("%d recorded uses, want 1 (at most one a minute)", n)
	}
	if n := f.count(`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'audit_token.create' AND actor_id = $2`, tid, f.userID("budi@melati.test")); n != 1 {
		t.Errorf("%d recorded creations by the owner, want 1", n)
	}

	// Revoked: 401, recorded, and the section says so.
	var id string
	if err := f.db.Admin.QueryRow(t.Context(), `SELECT id::text FROM audit_tokens WHERE token_hash = $1`, hash[:]).Scan(&id); err != nil {
		t.Fatal(err)
	}
	r := owner.post("/t/"+melati+"/audit/tokens/"+id+"/revoke", owner.withCSRF(nil), true)
	if r.status != http.StatusOK || !strings.Contains(r.body, `data-testid="token-revoked"`) {
		t.Fatalf("revoke: %d %.300s", r.status, r.body)
	}
	if a := f.bearer(base+"checkpoint", auth); a.status != http.StatusUnauthorized || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("revoked token: %d %q, want 401 with a Bearer challenge", a.status, a.header.Get("WWW-Authenticate"))
	}
	if r := owner.post("/t/"+melati+"/audit/tokens/"+id+"/revoke", owner.withCSRF(nil), true); r.status != http.StatusNotFound {
		t.Errorf("revoking twice: %d, want 404", r.status)
	}
	if n := f.count(`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'audit_token.revoke' AND entity_id = $2`, tid, id); n != 1 {
		t.Errorf("%d recorded revocations, want 1", n)
	}
	// The trail tells the three in words.
	f.seal()
	trail := owner.get("/t/" + melati + "/audit?entity=audit_token")
	for _, want := range []string{"created the audit token", "read the log from", "revoked the audit token"} {
		if !strings.Contains(trail.body, want) {
			t.Errorf("the trail does not say %q", want)
		}
	}
}

// TestAuditTokensAreOwnersBusiness: a member neither sees the section
// nor creates a token (403); a bad name is a 422 next to the field and
// creates nothing; a tenant's active tokens are bounded; another tenant's
// owner cannot revoke a token (404) and it keeps working.
func TestAuditTokensAreOwnersBusiness(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	member := f.client()
	member.login("rina@melati.test")
	if page := member.get("/t/" + melati + "/audit"); page.status != http.StatusOK || strings.Contains(page.body, `data-testid="audit-tokens`) {
		t.Fatalf("a member's trail page: %d, token section shown: %v", page.status, strings.Contains(page.body, `data-testid="audit-tokens`))
	}
	if a := member.get("/t/" + melati + "/audit/tokens"); a.status != http.StatusForbidden || strings.Contains(a.body, "token-form") {
		t.Fatalf("a member reading the token section: %d, want 403", a.status)
	}
	if a := member.post("/t/"+melati+"/audit/tokens", member.withCSRF(url.Values{"name": {"mine"}}), true); a.status != http.StatusForbidden {
		t.Fatalf("a member creating a token: %d, want 403", a.status)
	}

	admin := f.client()
	admin.login("eko@melati.test")
	for _, name := range []string{"", "   ", strings.Repeat("x", 65), "two\nlines"} {
		a := admin.post("/t/"+melati+"/audit/tokens", admin.withCSRF(url.Values{"name": {name}}), true)
		if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `data-testid="field-error-name"`) {
			t.Errorf("name %q: %d, want 422 with the message by the field", name, a.status)
		}
	}
	if n := f.count(`SELECT count(*) FROM audit_tokens`); n != 0 {
		t.Fatalf("%d tokens after refused names", n)
	}

	var last string
	for i := 0; i < 20; i++ {
		last = createToken(t, admin, melati, "witness "+string(rune('a'+i)))
	}
	a := admin.post("/t/"+melati+"/audit/tokens", admin.withCSRF(url.Values{"name": {"one too many"}}), true)
	if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, "at most 20 active") {
		t.Errorf("the 21st token: %d %.300s", a.status, a.body)
	}
	if n := f.count(`SELECT count(*) FROM audit_tokens`); n != 20 {
		t.Fatalf("%d tokens, want 20", n)
	}

	stranger := f.client()
	stranger.login("sari@senja.test")
	hash := sha256.Sum256([]byte(last))
	var id string
	if err := f.db.Admin.QueryRow(t.Context(), `SELECT id::text FROM audit_tokens WHERE token_hash = $1`, hash[:]).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if a := stranger.post("/t/kopi-senja/audit/tokens/"+id+"/revoke", stranger.withCSRF(nil), true); a.status != http.StatusNotFound {
		t.Errorf("another tenant's owner revoking: %d, want 404", a.status)
	}
	if a := stranger.post("/t/"+melati+"/audit/tokens/"+id+"/revoke", stranger.withCSRF(nil), true); a.status != http.StatusNotFound {
		t.Errorf("a stranger on melati's revoke route: %d, want 404", a.status)
	}
	f.seal()
	if a := f.bearer("/t/"+melati+"/audit/log/checkpoint", "Bearer "+last); a.status != http.StatusOK {
		t.Errorf("the token after refused revocations: %d", a.status)
	}
}

// TestBrowserWitnessTokens: in a real Chromium an owner opens the witness
// tokens section under the trail (loaded by htmx), creates a token and
// revokes it, both swapped in place (a marker on window survives), and the
// section passes axe.
func TestBrowserWitnessTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := browsertest.New(t)
	if err := signIn(ctx, f.srv.URL, "budi@melati.test"); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	// The section under the trail is closed; opening it loads the form.
	err := chromedp.Do(ctx,
		chromedp.Navigate(f.srv.URL+"/t/"+melati+"/audit"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="audit-tokens-box"] summary`)),
		chromedp.Click(chromedp.CSS(`[data-testid="audit-tokens-box"] summary`)),
	)
	if err != nil {
		t.Fatalf("trail page: %v", err)
	}
	// The form arrives by htmx and is wired up only when its swap settles:
	// a click before that is the browser's own submission, a navigation.
	browsertest.Wait(t, ctx, "the token form loaded", `!!document.querySelector('[data-testid="token-form"]')`)
	// htmx asks window.confirm before a revoke; the test says yes.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker = true; window.confirm = () => true; true`)); err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`#token-name`), "auditor laptop"),
		chromedp.Click(chromedp.CSS(`[data-testid="token-create"]`)),
	)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	browsertest.Wait(t, ctx, "the new token shown once", `!!document.querySelector('[data-testid="new-token"]')`)
	shown, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="new-token"]`)))
	if err != nil || !strings.HasPrefix(shown, "jat_") {
		t.Fatalf("shown token %q: %v", shown, err)
	}
	cmd, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="witness-command"]`)))
	if err != nil || !strings.Contains(cmd, "JEJAK_AUDIT_TOKEN="+shown) || !strings.Contains(cmd, "--url "+f.srv.URL) || !strings.Contains(cmd, "--slug "+melati) {
		t.Fatalf("witness command %q: %v", cmd, err)
	}
	hash := sha256.Sum256([]byte(shown))
	if n := f.count(`SELECT count(*) FROM audit_tokens WHERE token_hash = $1 AND name = 'auditor laptop'`, hash[:]); n != 1 {
		t.Fatalf("%d tokens stored for the shown one", n)
	}
	browsertest.AxeClean(t, ctx, "trail page with a new token")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="token-revoke"]`))); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	browsertest.Wait(t, ctx, "the revocation said", `!!document.querySelector('[data-testid="token-revoked"]')`)
	if marker, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__jejakMarker === true`)); err != nil || !marker {
		t.Fatalf("the page reloaded (marker %v, %v): htmx did not swap the section", marker, err)
	}
	if n := f.count(`SELECT count(*) FROM audit_tokens WHERE token_hash = $1 AND revoked_at IS NOT NULL`, hash[:]); n != 1 {
		t.Fatal("the token is not revoked in the database")
	}
	if a := f.bearer("/t/"+melati+"/audit/log/checkpoint", "Bearer "+shown); a.status != http.StatusUnauthorized {
		t.Fatalf("the revoked token still reads: %d", a.status)
	}
}

// TestAuditTokenLimitHoldsUnderConcurrentCreation: 30 creations at once
// leave exactly the limit of active tokens; the rest are refused.
func TestAuditTokenLimitHoldsUnderConcurrentCreation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tokens := audit.NewTokens(f.db.App, nil)
	tid, uid := f.tenantID(melati), f.userID("budi@melati.test")
	errs := make(chan error, 30)
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := tokens.Create(context.Background(), tid, uid, fmt.Sprintf("racer %d", i))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	var ok, refused int
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, audit.ErrTooManyTokens):
			refused++
		default:
			t.Fatalf("create: %v", err)
		}
	}
	if ok != audit.MaxActiveTokens || refused != 30-audit.MaxActiveTokens {
		t.Fatalf("%d created, %d refused; want %d and %d", ok, refused, audit.MaxActiveTokens, 30-audit.MaxActiveTokens)
	}
	if n := f.count(`SELECT count(*) FROM audit_tokens WHERE revoked_at IS NULL`); n != audit.MaxActiveTokens {
		t.Fatalf("%d active tokens stored", n)
	}
}
