// Package schema embeds the goose migrations so the binary can apply them on
// start and tests can build their template database from the same files.
package schema

import "embed"

// FS holds every numbered migration in this directory.
//
//go:embed *.sql
var FS embed.FS
