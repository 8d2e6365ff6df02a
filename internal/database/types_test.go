package database_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jejakhq/jejak/internal/testdb"
)

// TestJSONReadsAsPgxWould: through Jejak's pools a json or jsonb value
// reads into a json.RawMessage (copied, not parsed) exactly as pgx's own
// codec reads it on a plain pool, NULL included, and other targets still
// decode.
func TestJSONReadsAsPgxWould(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	for _, expr := range []string{
		`'{"b": [1, 2.50, "x\u00e9"], "a": {"c": null}}'::jsonb`,
		`'  {"a" : 1 ,"b":[ ]}  '::json`,
		`'"<tag> & \"quote\""'::jsonb`,
		`'null'::jsonb`,
		`'12'::json`,
		`NULL::jsonb`,
		`NULL::json`,
	} {
		var ours, theirs json.RawMessage
		if err := db.System.QueryRow(ctx, "SELECT "+expr).Scan(&ours); err != nil {
			t.Fatal(expr, err)
		}
		if err := db.Admin.QueryRow(ctx, "SELECT "+expr).Scan(&theirs); err != nil {
			t.Fatal(expr, err)
		}
		if string(ours) != string(theirs) || (ours == nil) != (theirs == nil) {
			t.Errorf("%s: read %q (nil %v), pgx's codec reads %q (nil %v)", expr, ours, ours == nil, theirs, theirs == nil)
		}
	}
	// Two rows through one buffer: the first value is a copy, not a view
	// of pgx's read buffer.
	rows, err := db.App.Query(ctx, `SELECT v FROM (VALUES ('{"n": 1}'::jsonb), ('{"n": 2}'::jsonb)) x(v)`)
	if err != nil {
		t.Fatal(err)
	}
	var got []json.RawMessage
	for rows.Next() {
		var v json.RawMessage
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if rows.Err() != nil || len(got) != 2 || string(got[0]) != `{"n": 1}` || string(got[1]) != `{"n": 2}` {
		t.Fatalf("rows read %q (%v)", got, rows.Err())
	}
	// The pools' own codec copies without parsing: the same bytes that
	// json.Unmarshal refuses (PostgreSQL never sends such) are copied as
	// they are. Without registerTypes this fails with pgx's codec's error.
	conn, err := db.App.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	typ, ok := conn.Conn().TypeMap().TypeForOID(pgtype.JSONBOID)
	if !ok {
		t.Fatal("no jsonb type on the pool's connection")
	}
	codec, ok := typ.Codec.(*pgtype.JSONBCodec)
	if !ok {
		t.Fatalf("jsonb codec %T", typ.Codec)
	}
	var raw json.RawMessage
	if err := codec.Unmarshal([]byte(`{"not json`), &raw); err != nil || string(raw) != `{"not json` {
		t.Fatalf("the pool's jsonb codec parsed instead of copying: %q, %v", raw, err)
	}
	var m map[string]any
	if err := db.System.QueryRow(ctx, `SELECT '{"a": [1, "b"]}'::jsonb`).Scan(&m); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"a": []any{1.0, "b"}}; !reflect.DeepEqual(m, want) {
		t.Fatalf("decoded %#v, want %#v", m, want)
	}
}
