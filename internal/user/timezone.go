package user

import (
	"context"
	"strings"
	"time"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/tz"
)

// ErrInvalidTimeZone: the zone is not an IANA time zone name.
var ErrInvalidTimeZone = apperr.Invalid("time_zone", "Choose a time zone from the list.")

// StaffZones are the zones offered to staff for their pages (any IANA
// zone is accepted; these are the ones Jejak's staff work in).
var StaffZones = []string{"UTC", "Asia/Jakarta", "Asia/Makassar", "Asia/Jayapura", "Asia/Singapore",
	"Asia/Kolkata", "Asia/Tokyo", "Australia/Sydney", "Europe/London", "Europe/Amsterdam",
	"America/New_York", "America/Los_Angeles"}

// TimeZone resolves a saved zone name to a location: UTC when none is
// saved or the name no longer resolves (the tz database changed).
func TimeZone(name string) *time.Location {
	if name == "" {
		return time.UTC
	}
	loc, err := tz.Load(name)
	if err != nil {
		return time.UTC
	}
	return loc
}

// validZone accepts an IANA zone name; "Local" is refused because it
// means the server's own zone, which no reader chose.
func validZone(name string) bool {
	if name == "" || len(name) > 64 || name == "Local" {
		return false
	}
	_, err := tz.Load(name)
	return err == nil
}

// SetTimeZone saves the zone userID reads staff pages in; "" or "UTC"
// means UTC.
func (s *Service) SetTimeZone(ctx context.Context, userID int64, zone string) error {
	var z *string
	zone = strings.TrimSpace(zone)
	if zone != "" && zone != "UTC" {
		if !validZone(zone) {
			return ErrInvalidTimeZone
		}
		z = &zone
	}
	found, err := s.store.SetTimeZone(ctx, userID, z)
	if err != nil {
		return err
	}
	if !found {
		return ErrNotFound
	}
	return nil
}
