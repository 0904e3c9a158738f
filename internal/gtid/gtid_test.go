package gtid

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	a = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	b = "4e11fa47-71ca-11e1-9e33-c80aa9429562"
)

func TestParseAndString(t *testing.T) {
	cases := map[string]string{
		"":                                       "",
		a + ":1-5":                               a + ":1-5",
		a + ":1-3:4-5":                           a + ":1-5",
		a + ":7:1-5,\n" + b + ":2":               a + ":1-5:7," + b + ":2",
		b + ":1," + a + ":1":                     a + ":1," + b + ":1",
		a + ":1-2:tag:1-3":                       a + ":1-2," + a + ":tag:1-3",
		"3E11FA47-71CA-11E1-9E33-C80AA9429562:1": a + ":1",
	}
	for in, want := range cases {
		s, err := Parse(in)
		require.NoError(t, err, in)
		require.Equal(t, want, s.String(), in)
	}
	for _, bad := range []string{"x:1", a, a + ":0", a + ":5-3", a + ":1-x", a + "::1"} {
		_, err := Parse(bad)
		require.Error(t, err, bad)
	}
}

func TestArithmetic(t *testing.T) {
	s := MustParse(a + ":1-10," + b + ":1-3")
	o := MustParse(a + ":3-4:8," + b + ":1-3")
	require.Equal(t, a+":1-2:5-7:9-10", s.Subtract(o).String())
	require.Equal(t, "", o.Subtract(s).String())
	require.True(t, s.Contains(o))
	require.False(t, o.Contains(s))
	require.Equal(t, int64(13), s.Count())
	require.Equal(t, o.String(), s.Intersect(o).String())
	require.True(t, s.Union(o).Equal(s))
	require.Equal(t, a+":1-10,"+b+":1-5", s.Union(MustParse(b+":4-5")).String())
	require.True(t, Set{}.IsEmpty())
	require.True(t, MustParse("").Contains(Set{}))
	tagged := MustParse(a + ":tag:1-3")
	require.False(t, s.Contains(tagged), "a tagged GTID is not its untagged namesake")
	require.Equal(t, b+":1-3", s.Union(tagged).WithoutSource(strings.ToUpper(a)).String(), "tagged or not, a's transactions go")
	require.Equal(t, s.String(), s.WithoutSource("").String())
}
