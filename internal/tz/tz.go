// Package tz loads IANA time zones once per process: time.LoadLocation
// reads and parses the zone's file on every call, and every tenant page
// asks for its tenant's zone several times.
package tz

import (
	"sync"
	"time"
)

// zones maps a name to its *time.Location; names that fail to load are
// not kept, so the map holds only the zones some tenant or user chose.
var zones sync.Map

// Load is time.LoadLocation, remembered per name.
func Load(name string) (*time.Location, error) {
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, loc)
	return loc, nil
}
