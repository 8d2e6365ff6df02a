// Package static serves Jejak's front-end files from the binary (go:embed):
// htmx (with idiomorph), the stylesheet and the favicon. Versions and
// checksums are in static/README.md.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
)

// FS holds the files served under /static/.
//
//go:embed *.js *.css *.svg
var FS embed.FS

var versions = func() map[string]string {
	m := map[string]string{}
	entries, _ := fs.ReadDir(FS, ".")
	for _, e := range entries {
		b, _ := fs.ReadFile(FS, e.Name())
		sum := sha256.Sum256(b)
		m[e.Name()] = hex.EncodeToString(sum[:4])
	}
	return m
}()

// Path returns the URL of a static file with a content hash, so browsers
// may cache it forever and still pick up a new build.
func Path(name string) string {
	return "/static/" + name + "?v=" + versions[name]
}
