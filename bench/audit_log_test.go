package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/jejakhq/jejak/internal/anchor"
)

// TestBenchAnchorDirSignsWithTheScaleKey: a server given the anchor
// directory the http family writes for the scale database signs
// checkpoints that the scale key's verifier accepts, as audit_log later
// verifies that database's logs.
func TestBenchAnchorDirSignsWithTheScaleKey(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "anchors")
	if err := writeBenchAnchorDir(dir); err != nil {
		t.Fatal(err)
	}
	store, err := anchor.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	served, err := store.Signer()
	if err != nil {
		t.Fatal(err)
	}
	bench, err := benchLogSigner()
	if err != nil {
		t.Fatal(err)
	}
	signed, err := served.Sign("jejak/audit/toko-bunga-melati", 3, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := note.NewVerifier(bench.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open([]byte(signed), note.VerifierList(verifier)); err != nil {
		t.Fatalf("a checkpoint the server would sign does not verify with the scale key (%s): %v", bench.VerifierKey(), err)
	}
}
