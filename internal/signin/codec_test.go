package signin_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"

	"github.com/jejakhq/jejak/internal/signin"
)

// TestSessionCodecIsDeterministicAndReadsOldSessions: the same session
// encodes to the same bytes every time (a map's order would not), round
// trips, and a session written by scs's own gob codec still reads.
func TestSessionCodecIsDeterministicAndReadsOldSessions(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	values := map[string]any{"user_id": int64(7), "csrf": "tok", "flash": "Saved.", "verify:3": "{}", "z": int64(1)}
	c := signin.SessionCodec{}
	first, err := c.Encode(deadline, values)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		again, err := c.Encode(deadline, values)
		if err != nil || !bytes.Equal(again, first) {
			t.Fatalf("encoding %d differs from the first (%v)", i, err)
		}
	}
	for _, b := range [][]byte{first, mustGob(t, deadline, values)} {
		d, got, err := c.Decode(b)
		if err != nil || !d.Equal(deadline) || len(got) != len(values) || got["user_id"] != int64(7) || got["csrf"] != "tok" {
			t.Fatalf("decoded %v %v (%v)", d, got, err)
		}
	}
}

func mustGob(t *testing.T, deadline time.Time, values map[string]any) []byte {
	t.Helper()
	b, err := scs.GobCodec{}.Encode(deadline, values)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSessionCodecBinaryForm: Jejak's values (int64 and string) take the
// short binary form, which keeps the deadline and every value exactly; a
// value of another type falls back to the gob form, which still round
// trips; a damaged record is refused, never read as another session.
func TestSessionCodecBinaryForm(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2026, 12, 4, 20, 0, 0, 123456789, time.UTC)
	c := signin.SessionCodec{}
	values := map[string]any{"user_id": int64(-42), "csrf": "tok\x00\x01ü", "audit_verify:9": "", "big": int64(1) << 62}
	b, err := c.Encode(deadline, values)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != 0 {
		t.Fatalf("int64 and string values took the gob form: % x", b[:8])
	}
	gobForm, err := c.Encode(deadline, map[string]any{"user_id": int64(7), "flag": true})
	if err != nil {
		t.Fatal(err)
	}
	if gobForm[0] == 0 {
		t.Fatalf("a bool took the binary form")
	}
	d, got, err := c.Decode(b)
	if err != nil || !d.Equal(deadline) || len(got) != len(values) {
		t.Fatalf("decoded %v %v (%v)", d, got, err)
	}
	for k, v := range values {
		if got[k] != v {
			t.Fatalf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	if _, got, err := c.Decode(gobForm); err != nil || got["flag"] != true || got["user_id"] != int64(7) {
		t.Fatalf("gob form decoded %v (%v)", got, err)
	}
	for cut := 3; cut < len(b); cut++ {
		if _, got, err := c.Decode(b[:cut]); err == nil {
			t.Fatalf("a record cut at %d of %d decoded as %v", cut, len(b), got)
		}
	}
	if _, _, err := c.Decode(append(b, 'x')); err == nil {
		t.Fatalf("a record with trailing bytes decoded")
	}
}
