package database_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/testdb"
)

// definerGrants is who may run each SECURITY DEFINER function (besides its
// owner): such a function acts with the owner's rights, so each is
// granted to the pools that need it and to no one else.
var definerGrants = map[string][]string{
	"app_enforce_membership()":                                     nil,
	"app_is_member()":                                              {"jejak_app", "jejak_system"},
	"app_refresh_statistics(integer,bigint)":                       {"jejak_system"},
	"audit_namesakes(text,text)":                                   {"jejak_app", "jejak_system"},
	"job_payload_intact(bigint,bigint,text,jsonb,bytea)":           {"jejak_app", "jejak_system"},
	"job_payload_mac(bigint,bigint,text,jsonb)":                    nil,
	"jobs_sign_payload()":                                          nil,
	"jobs_tampered_rows(bigint[],bigint[],text[],jsonb[],bytea[])": {"jejak_app", "jejak_system"},
	"wake_notify(text)":                                            {"jejak_app", "jejak_system"},
	"audit_search_ids(text,bigint,integer,text[],text,text,text,text,bigint,text,bigint,timestamp with time zone,timestamp with time zone)": {"jejak_app", "jejak_system"},
}

// TestDefinerFunctionsRunOnlyForTheirCallers: every SECURITY DEFINER
// function of the schema is in definerGrants, no role but those listed
// (PUBLIC included) may execute it, and each listed one may.
func TestDefinerFunctionsRunOnlyForTheirCallers(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	rows, err := db.Admin.Query(ctx, `SELECT p.oid::regprocedure::text,
			coalesce(array_agg(r.rolname ORDER BY r.rolname) FILTER (WHERE r.rolname IS NOT NULL), '{}'),
			has_function_privilege('public', p.oid, 'EXECUTE')
		  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		  LEFT JOIN pg_roles r ON r.rolname IN ('jejak_app', 'jejak_system')
		       AND has_function_privilege(r.oid, p.oid, 'EXECUTE')
		 WHERE n.nspname = 'public' AND p.prosecdef
		 GROUP BY p.oid`)
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		fn     string
		roles  []string
		public bool
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (grant, error) {
		var g grant
		err := r.Scan(&g.fn, &g.roles, &g.public)
		return g, err
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, g := range got {
		seen[g.fn] = true
		want, known := definerGrants[g.fn]
		switch {
		case !known:
			t.Errorf("%s is SECURITY DEFINER and not in definerGrants: say who may run it", g.fn)
		case g.public:
			t.Errorf("%s is executable by PUBLIC (every role of the cluster)", g.fn)
		case !slices.Equal(g.roles, want):
			t.Errorf("%s is executable by %v, want %v", g.fn, g.roles, want)
		}
	}
	for _, fn := range slices.Sorted(maps.Keys(definerGrants)) {
		if !seen[fn] {
			t.Errorf("%s is in definerGrants but not a SECURITY DEFINER function of the schema", fn)
		}
	}
}
