package admin_test

import (
	"context"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/views/admin"
)

// BenchmarkJobsResults renders the staff job list's page of 50 rows.
func BenchmarkJobsResults(b *testing.B) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	vm := admin.JobsVM{Tenants: admin.TenantMap([]admin.Tenant{{ID: 1, Slug: "toko-bunga-melati", Name: "Toko Bunga Melati"}}), FirstPage: true}
	states := []string{"pending", "running", "succeeded", "dead", "cancelled"}
	for i := range 50 {
		vm.Rows = append(vm.Rows, admin.JobRow{ID: int64(1000 + i), TenantID: 1, Kind: "email.weekly-report", Queue: "default",
			State: states[i%len(states)], Attempt: 1, MaxAttempts: 5, CreatedAt: now, FinishedAt: &now,
			LastError: "smtp 550 mailbox unavailable " + strconv.Itoa(i), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"})
	}
	ctx := i18n.WithLang(context.Background(), "en")
	b.ReportAllocs()
	for b.Loop() {
		if err := admin.JobsResults(vm).Render(ctx, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
