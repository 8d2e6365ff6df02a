package main

import (
	"os"
	"syscall"
)

// fdatasync flushes file data like PostgreSQL's default wal_sync_method.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
