package staff_test

import (
	"testing"

	"github.com/jejakhq/jejak/internal/staff"
)

func TestAdminsHoldWhatSupportHoldsAndMore(t *testing.T) {
	t.Parallel()
	for _, p := range staff.All {
		if staff.Can(staff.RoleSupport, p) && !staff.Can(staff.RoleAdmin, p) {
			t.Errorf("support holds %s, admin does not", p)
		}
		if staff.Can("", p) || staff.Can("owner", p) {
			t.Errorf("a non-staff role holds %s", p)
		}
	}
	for _, p := range []staff.Permission{staff.DiscardOne, staff.Bulk, staff.Decide, staff.Pause, staff.Schedules, staff.Secrets, staff.LiftDisable} {
		if staff.Can(staff.RoleSupport, p) {
			t.Errorf("support holds %s, which is for admins only", p)
		}
	}
	for _, p := range []staff.Permission{staff.Read, staff.RetryOne} {
		if !staff.Can(staff.RoleSupport, p) {
			t.Errorf("support lacks %s", p)
		}
	}
}
