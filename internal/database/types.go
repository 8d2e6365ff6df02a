package database

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// registerTypes replaces the connection's json and jsonb codecs with ones
// that read into a json.RawMessage by copying the bytes. pgx's codec runs
// json.Unmarshal for it, which parses the whole document only to copy it:
// PostgreSQL's output is valid JSON already, and the trail reads a detail
// per event (a twentieth of the web process's CPU on the owner's trail).
func registerTypes(_ context.Context, conn *pgx.Conn) error {
	m := conn.TypeMap()
	m.RegisterType(&pgtype.Type{Name: "json", OID: pgtype.JSONOID, Codec: &pgtype.JSONCodec{Marshal: json.Marshal, Unmarshal: unmarshalJSON}})
	m.RegisterType(&pgtype.Type{Name: "jsonb", OID: pgtype.JSONBOID, Codec: &pgtype.JSONBCodec{Marshal: json.Marshal, Unmarshal: unmarshalJSON}})
	return nil
}

// unmarshalJSON is json.Unmarshal, except into a json.RawMessage, which
// gets a copy of data (pgx reuses its read buffer) without the white space
// around the value, as json.Unmarshal would leave it (a json column keeps
// its input's spacing; jsonb's output has none).
func unmarshalJSON(data []byte, v any) error {
	if r, ok := v.(*json.RawMessage); ok {
		*r = append(json.RawMessage(nil), bytes.Trim(data, " \t\r\n")...)
		return nil
	}
	return json.Unmarshal(data, v)
}
