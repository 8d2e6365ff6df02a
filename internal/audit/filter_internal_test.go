package audit

import (
	"reflect"
	"testing"
	"time"
)

// TestEveryFilterFieldNarrows: the plain trail has a statement of its own
// without any filter, so a filter whose field unfiltered forgets would be
// silently dropped. Each field of Filter, set on its own, must count.
func TestEveryFilterFieldNarrows(t *testing.T) {
	t.Parallel()
	if f := (Filter{}); !f.unfiltered() {
		t.Fatal("the zero filter narrows something")
	}
	n, at := int64(7), time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	ft := reflect.TypeFor[Filter]()
	for i := range ft.NumField() {
		var f Filter
		v := reflect.ValueOf(&f).Elem().Field(i)
		switch v.Interface().(type) {
		case string:
			v.SetString("x")
		case ActorKind:
			v.SetString(string(ActorStaff))
		case []string:
			v.Set(reflect.ValueOf([]string{}))
		case *int64:
			v.Set(reflect.ValueOf(&n))
		case *time.Time:
			v.Set(reflect.ValueOf(&at))
		default:
			t.Fatalf("Filter.%s has a type this test does not set (%s): add it", ft.Field(i).Name, v.Type())
		}
		if f.unfiltered() {
			t.Errorf("Filter.%s set, but the filter counts as none", ft.Field(i).Name)
		}
	}
}
