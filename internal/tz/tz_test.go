package tz

import (
	"testing"
	"time"
)

func TestLoadRemembersTheZone(t *testing.T) {
	first, err := Load("Asia/Makassar")
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	again, err := Load("Asia/Makassar")
	if err != nil {
		t.Fatalf("load again: %v", err)
	}
	if first != again {
		t.Fatalf("second load returned a new location, want the remembered one")
	}
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).In(first)
	if name, off := at.Zone(); name != "WITA" || off != 8*3600 {
		t.Fatalf("zone = %s %d, want WITA +8h", name, off)
	}
}

func TestLoadRefusesUnknownZones(t *testing.T) {
	if _, err := Load("Mars/Olympus_Mons"); err == nil {
		t.Fatalf("an unknown zone loaded")
	}
	if _, ok := zones.Load("Mars/Olympus_Mons"); ok {
		t.Fatalf("an unknown zone was remembered")
	}
}
