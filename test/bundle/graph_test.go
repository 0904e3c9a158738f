package bundle

import (
	"testing"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/require"
)

func catalogOf(versions map[string]string, entries ...Entry) *Catalog {
	c := &Catalog{Bundles: map[string]semver.Version{}, Channels: map[string]map[string][]Entry{
		"p": {"ch": entries},
	}}
	for name, v := range versions {
		c.Bundles[name] = semver.MustParse(v)
	}
	return c
}

var three = map[string]string{"a": "0.1.0", "b": "0.2.0", "c": "0.3.0"}

// The graph checker must catch the graphs that strand users; each case is one way to break one.
func TestCheckChannel(t *testing.T) {
	cases := []struct {
		name    string
		entries []Entry
		head    string
		wantErr string
	}{
		{name: "replaces chain", head: "c",
			entries: []Entry{{Name: "a"}, {Name: "b", Replaces: "a"}, {Name: "c", Replaces: "b"}}},
		{name: "head skips a version by skipRange", head: "c",
			entries: []Entry{{Name: "a"}, {Name: "b", Replaces: "a"}, {Name: "c", SkipRange: ">=0.1.0 <0.3.0"}}},
		{name: "head skips a version by skips", head: "c",
			entries: []Entry{{Name: "a"}, {Name: "b", Replaces: "a"}, {Name: "c", Replaces: "b", Skips: []string{"a"}}}},
		{name: "one entry", head: "a", entries: []Entry{{Name: "a"}}},
		{name: "an old version with no way up", wantErr: "want one head",
			entries: []Entry{{Name: "a"}, {Name: "b"}, {Name: "c", Replaces: "b"}}},
		{name: "skipRange that misses the oldest", wantErr: "want one head",
			entries: []Entry{{Name: "a"}, {Name: "b"}, {Name: "c", SkipRange: ">=0.2.0 <0.3.0"}}},
		{name: "head older than another entry", wantErr: "is older than",
			entries: []Entry{{Name: "a", Replaces: "c"}, {Name: "b", Replaces: "a"}, {Name: "c"}}},
		{name: "entry without a bundle", wantErr: "has no bundle",
			entries: []Entry{{Name: "a"}, {Name: "z", Replaces: "a"}}},
		{name: "cycle has no head", wantErr: "want one head",
			entries: []Entry{{Name: "a", Replaces: "b"}, {Name: "b", Replaces: "a"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			head, err := catalogOf(three, tc.entries...).CheckChannel("p", "ch")
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.head, head)
		})
	}
}

func TestCheckChannelMissing(t *testing.T) {
	_, err := catalogOf(three).CheckChannel("p", "stable")
	require.ErrorContains(t, err, "empty or missing")
}

func TestValidateSkipRanges(t *testing.T) {
	require.NoError(t, catalogOf(three, Entry{Name: "b", SkipRange: "<0.2.0"}).ValidateSkipRanges())
	require.ErrorIs(t, catalogOf(three, Entry{Name: "b", SkipRange: "not a range"}).ValidateSkipRanges(), ErrNoSkipRange)
}
