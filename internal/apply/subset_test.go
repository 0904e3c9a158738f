package apply

import "testing"

func TestSubset(t *testing.T) {
	for name, tc := range map[string]struct {
		want, have any
		ok         bool
	}{
		"equal scalars":                {"a", "a", true},
		"different scalars":            {"a", "b", false},
		"numbers by value":             {int64(3), float64(3), true},
		"a number and a string":        {int64(3), "3", false},
		"nil has no opinion":           {nil, "anything", true},
		"extra keys in have are fine":  {map[string]any{"a": "1"}, map[string]any{"a": "1", "b": "2"}, true},
		"a missing key":                {map[string]any{"a": "1"}, map[string]any{"b": "2"}, false},
		"a missing key wanted nil":     {map[string]any{"a": nil}, map[string]any{}, true},
		"a changed nested value":       {map[string]any{"a": map[string]any{"b": "1"}}, map[string]any{"a": map[string]any{"b": "2"}}, false},
		"an empty map in a filled one": {map[string]any{"emptyDir": map[string]any{}}, map[string]any{"emptyDir": map[string]any{"medium": ""}}, true},
		"a map where a list is":        {map[string]any{"a": map[string]any{}}, map[string]any{"a": []any{}}, false},
		"list items with defaults added": {
			[]any{map[string]any{"name": "mysqld"}},
			[]any{map[string]any{"name": "mysqld", "terminationMessagePath": "/dev/termination-log"}}, true},
		"a list item someone else added": {
			[]any{map[string]any{"name": "a"}},
			[]any{map[string]any{"name": "a"}, map[string]any{"name": "sidecar"}}, true},
		"a list item of ours removed": {
			[]any{map[string]any{"name": "a"}, map[string]any{"name": "b"}},
			[]any{map[string]any{"name": "a"}}, false},
		"list items reordered":    {[]any{"x", "y"}, []any{"y", "x"}, true},
		"a list item changed":     {[]any{map[string]any{"name": "a", "image": "1"}}, []any{map[string]any{"name": "a", "image": "2"}}, false},
		"booleans":                {true, false, false},
		"a scalar where a map is": {"a", map[string]any{}, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Subset(tc.want, tc.have); got != tc.ok {
				t.Errorf("Subset(%v, %v) = %v, want %v", tc.want, tc.have, got, tc.ok)
			}
		})
	}
}
