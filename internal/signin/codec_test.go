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
