// Package keyfile creates a key file once for every replica that shares
// its directory: replicas started together each find the file missing and
// create it, and all of them must end up with the one key it holds.
package keyfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Read returns what path holds, creating the file with fresh's content
// (Create) when it does not exist.
func Read(path string, fresh func() ([]byte, error)) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if !errors.Is(err, os.ErrNotExist) {
		return raw, err
	}
	content, err := fresh()
	if err != nil {
		return nil, err
	}
	return Create(path, content)
}

// Create writes content to path, readable by its owner only, unless a file
// is there already, and returns what path holds: content when this call
// created it, the other creator's otherwise. The content is written to a
// file of its own beside path and linked into place, so path never exists
// partly written: created in place, it existed empty for a moment, and a
// replica starting beside its creator read no key and failed to start.
func Create(path string, content []byte) ([]byte, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err := os.Link(f.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return os.ReadFile(path)
		}
		return nil, err
	}
	return content, nil
}
