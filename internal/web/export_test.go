package web

import "github.com/jejakhq/jejak/internal/staff"

// StaffPermission is the permission a staff route needs, for the route ×
// role matrix test (routes_test.go), which takes who may call each staff
// route from staff.Can rather than from a list of its own.
func StaffPermission(method, path string) (staff.Permission, bool) {
	p, ok := staffPermissions[method+" "+path]
	return p, ok
}
