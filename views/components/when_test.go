package components_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/views/components"
)

func TestStampShowsTheZoneInTheReadersLanguage(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 8, 2, 7, 5, 9, 0, time.UTC)
	jakarta, _ := time.LoadLocation("Asia/Jakarta")
	kathmandu, _ := time.LoadLocation("Asia/Kathmandu")
	for _, c := range []struct {
		loc  *time.Location
		lang string
		want string
	}{
		{nil, "en", "2 Aug 2026 07:05:09 UTC"},
		{time.UTC, "id", "2 Agu 2026 07:05:09 UTC"},
		{jakarta, "id", "2 Agu 2026 14:05:09 WIB"},
		{kathmandu, "en", "2 Aug 2026 12:50:09 UTC+05:45"},
	} {
		if got := components.Stamp(at, c.loc, c.lang); got != c.want {
			t.Errorf("Stamp(%v, %s) = %q, want %q", c.loc, c.lang, got, c.want)
		}
	}
	if got := components.Stamp(time.Time{}, jakarta, "en"); got != "—" {
		t.Errorf("zero time: %q", got)
	}
}

// TestStampsReadAsStamp: a list's moments stamped one after another, from
// one day to the next, to the same day of another month and of another
// year, across midnight in the reader's zone but not in UTC, and through
// a zero time, read exactly as each reads alone (Stamp: a fresh Stamps,
// whose every moment starts a day).
func TestStampsReadAsStamp(t *testing.T) {
	t.Parallel()
	jakarta, _ := time.LoadLocation("Asia/Jakarta")
	base := time.Date(2026, 12, 5, 16, 59, 0, 0, time.UTC) // 23:59 WIB
	moments := []time.Time{base, base.Add(time.Minute), base.Add(2 * time.Minute), base.AddDate(0, -1, 0),
		base.AddDate(-1, -1, 0), {}, base.AddDate(-1, -1, 0).Add(time.Hour), base}
	for _, lang := range []string{"en", "id"} {
		for _, loc := range []*time.Location{nil, jakarta} {
			s := components.NewStamps(lang, loc)
			days := 0
			for _, m := range moments {
				text, _, newDay := s.Next(m)
				if want := components.Stamp(m, loc, lang); text != want {
					t.Fatalf("%s %v: %s stamped %q, want %q", lang, loc, m, text, want)
				}
				if newDay {
					days++
				}
			}
			if days < 4 {
				t.Fatalf("%s %v: %d new days; the moments must change day often", lang, loc, days)
			}
		}
	}
}

// dateLayout is a time layout that prints a date or clock time: pages
// print moments only through Stamp (machine formats such as RFC 3339 and
// date-only keys are not for readers and are allowed).
var dateLayout = regexp.MustCompile(`\.Format\("[^"]*(2006|Jan|15:04:05|MST)[^"]*"\)`)

// TestOneFormatterForTimes: no handler or view formats a timestamp itself.
func TestOneFormatterForTimes(t *testing.T) {
	t.Parallel()
	var offenders []string
	for _, dir := range []string{"../../views", "../../internal/web"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(path, "_templ.go") || strings.HasSuffix(path, "_test.go") ||
				!(strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".templ")) {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(b), "\n") {
				if dateLayout.MatchString(line) {
					offenders = append(offenders, path+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(offenders) > 0 {
		t.Fatalf("times formatted outside components.Stamp:\n%s", strings.Join(offenders, "\n"))
	}
}
