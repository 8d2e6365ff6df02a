package database_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/testdb"
)

// TestPrivilegesMatchDocs lists what each application role may do on every
// table and view of the schema (table-level privileges, and column lists
// where only some columns are granted) and compares it with the intended
// table in docs/tenancy.md, so a grant nobody meant (or a table nobody
// reviewed) fails here. The failure prints the actual table to paste after review.
func TestPrivilegesMatchDocs(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	roles := []string{"jejak_app", "jejak_system"}
	rows, err := db.Admin.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v') ORDER BY c.relname`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	actual := map[string][]string{}
	for _, tb := range tables {
		for _, role := range roles {
			var privs []string
			for _, p := range []string{"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"} {
				var whole, any bool
				if err := db.Admin.QueryRow(ctx, `SELECT has_table_privilege($1, $2, $3),
					CASE WHEN $3 IN ('SELECT', 'INSERT', 'UPDATE', 'REFERENCES')
					     THEN has_any_column_privilege($1, $2, $3) ELSE false END`,
					role, tb, p).Scan(&whole, &any); err != nil {
					t.Fatal(err)
				}
				switch {
				case whole:
					privs = append(privs, p)
				case any:
					var cols []string
					r, err := db.Admin.Query(ctx, `SELECT a.attname FROM pg_attribute a
						WHERE a.attrelid = $2::regclass AND a.attnum > 0 AND NOT a.attisdropped
						  AND has_column_privilege($1, $2, a.attname, $3) ORDER BY a.attnum`, role, tb, p)
					if err != nil {
						t.Fatal(err)
					}
					for r.Next() {
						var c string
						if err := r.Scan(&c); err != nil {
							t.Fatal(err)
						}
						cols = append(cols, c)
					}
					r.Close()
					privs = append(privs, p+"("+strings.Join(cols, ", ")+")")
				}
			}
			cell := strings.Join(privs, ", ")
			if cell == "" {
				cell = "—"
			}
			actual[tb] = append(actual[tb], cell)
		}
	}
	intended := readPrivilegeTable(t, "../../docs/tenancy.md")
	var b strings.Builder
	fmt.Fprintf(&b, "| table | %s |\n|---|---|---|\n", strings.Join(roles, " | "))
	for _, tb := range tables {
		fmt.Fprintf(&b, "| %s | %s |\n", tb, strings.Join(actual[tb], " | "))
	}
	bad := false
	for _, tb := range tables {
		want, ok := intended[tb]
		if !ok {
			t.Errorf("table %s is not in docs/tenancy.md's privilege table", tb)
			bad = true
			continue
		}
		if strings.Join(want, " | ") != strings.Join(actual[tb], " | ") {
			t.Errorf("%s: privileges %q, docs/tenancy.md intends %q", tb, actual[tb], want)
			bad = true
		}
	}
	var extra []string
	for tb := range intended {
		if _, ok := actual[tb]; !ok {
			extra = append(extra, tb)
		}
	}
	sort.Strings(extra)
	for _, tb := range extra {
		t.Errorf("docs/tenancy.md lists %s, which the schema does not have", tb)
		bad = true
	}
	if bad {
		t.Logf("actual privileges:\n%s", b.String())
	}
}

// readPrivilegeTable parses the markdown table between the
// "privileges:begin" and "privileges:end" markers.
func readPrivilegeTable(t *testing.T, path string) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	begin, end := strings.Index(s, "<!-- privileges:begin -->"), strings.Index(s, "<!-- privileges:end -->")
	if begin < 0 || end < begin {
		t.Fatalf("%s has no privileges:begin/end markers", path)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(s[begin:end], "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| table") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.Trim(strings.TrimSpace(cells[i]), "`")
		}
		out[cells[0]] = cells[1:]
	}
	return out
}
