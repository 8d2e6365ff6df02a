package console

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/jejakhq/jejak/internal/job"
)

// TestEveryJobFilterFieldNarrows: the unfiltered job list has a statement
// of its own, so a filter field that none forgets would be silently
// dropped. Each field of jobFilter, set on its own, must count.
func TestEveryJobFilterFieldNarrows(t *testing.T) {
	t.Parallel()
	if !(jobFilter{}).none() {
		t.Fatal("the zero filter narrows something")
	}
	ft := reflect.TypeFor[jobFilter]()
	for i := range ft.NumField() {
		var f jobFilter
		v := reflect.ValueOf(&f).Elem().Field(i)
		switch v.Interface().(type) {
		case string:
			v.SetString("x")
		case job.State:
			v.SetString(string(job.StateDead))
		case int64:
			v.SetInt(7)
		case json.RawMessage:
			v.SetBytes([]byte(`{"a":1}`))
		default:
			t.Fatalf("jobFilter.%s has a type this test does not set (%s): add it", ft.Field(i).Name, v.Type())
		}
		if f.none() {
			t.Errorf("jobFilter.%s set, but the filter counts as none", ft.Field(i).Name)
		}
	}
}
