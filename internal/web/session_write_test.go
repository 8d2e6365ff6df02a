package web_test

import (
	"context"
	"testing"
	"time"
)

// TestReadsDoNotRewriteTheSession: pages that change nothing leave the
// session row as it is; once the idle timeout has moved its expiry far
// enough, the next page writes it again.
func TestReadsDoNotRewriteTheSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	c := f.client()
	c.login("budi@melati.test")
	row := func() (version string, expiry time.Time) {
		t.Helper()
		if err := f.db.Admin.QueryRow(ctx, `SELECT xmin::text, expiry FROM sessions`).Scan(&version, &expiry); err != nil {
			t.Fatal(err)
		}
		return version, expiry
	}
	signedIn, _ := row()
	// Enough reads that a session encoded in a map's random order would
	// have come out different at least once.
	for i := 0; i < 8; i++ {
		for _, p := range []string{"/t/toko-bunga-melati/", "/t/toko-bunga-melati/audit", "/t/toko-bunga-melati/jobs"} {
			if a := c.get(p); a.status != 200 {
				t.Fatalf("GET %s: %d", p, a.status)
			}
		}
	}
	if v, _ := row(); v != signedIn {
		t.Fatalf("reading pages rewrote the session (row version %s, was %s)", v, signedIn)
	}

	// As if the last write were ten minutes old.
	if _, err := f.db.Admin.Exec(ctx, `UPDATE sessions SET expiry = expiry - interval '10 minutes'`); err != nil {
		t.Fatal(err)
	}
	aged, agedExpiry := row()
	if a := c.get("/t/toko-bunga-melati/"); a.status != 200 {
		t.Fatalf("GET home: %d", a.status)
	}
	v, expiry := row()
	if v == aged || expiry.Sub(agedExpiry) < 9*time.Minute {
		t.Fatalf("the idle timeout was not moved: expiry %v, was %v (row %s, was %s)", expiry, agedExpiry, v, aged)
	}
}
