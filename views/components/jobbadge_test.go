package components_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/views/components"
)

// TestJobStateBadge: the state's class and data attribute as written, its
// name in the reader's language, and a value that is not a state escaped
// wherever it lands.
func TestJobStateBadge(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ lang, state, want string }{
		{"en", "dead", `<span class="badge dead" data-testid="job-state" data-state="dead">dead</span>`},
		{"id", "dead", `<span class="badge dead" data-testid="job-state" data-state="dead">mati</span>`},
		{"en", `x"><b>`, `<span class="badge x&#34;&gt;&lt;b&gt;" data-testid="job-state" data-state="x&#34;&gt;&lt;b&gt;">x&#34;&gt;&lt;b&gt;</span>`},
	} {
		var b strings.Builder
		if err := components.JobState(c.state).Render(i18n.WithLang(context.Background(), c.lang), &b); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Errorf("%s %q:\n got %s\nwant %s", c.lang, c.state, b.String(), c.want)
		}
	}
}
