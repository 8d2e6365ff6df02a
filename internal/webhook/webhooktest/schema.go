// Package webhooktest checks webhook payloads for tests, against the event
// catalog's JSON Schemas, with a JSON Schema implementation Jejak did not
// write (santhosh-tekuri/jsonschema, which passes the official suite).
package webhooktest

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/jejakhq/jejak/internal/webhook"
)

// Conforms reports whether payload fits the schema of event type typ.
func Conforms(typ string, payload []byte) error {
	for _, e := range webhook.Catalog {
		if e.Type == typ {
			return ConformsTo(e.Schema, payload)
		}
	}
	return fmt.Errorf("%s is not in the webhook catalog", typ)
}

// ConformsTo checks payload against schema (a JSON Schema document).
func ConformsTo(schema string, payload []byte) error {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		return fmt.Errorf("schema %s: %w", schema, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("catalog.json", doc); err != nil {
		return err
	}
	sch, err := c.Compile("catalog.json")
	if err != nil {
		return fmt.Errorf("compile %s: %w", schema, err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("not JSON: %s", payload)
	}
	return sch.Validate(inst)
}
