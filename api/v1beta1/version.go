package v1beta1

import (
	"fmt"
	"strconv"
	"strings"
)

// MySQLVersion is a parsed spec.mysql.version: an LTS series, and a patch release when
// the user pinned one.
type MySQLVersion struct {
	Major, Minor int
	// Patch is -1 when only the series was given ("8.4").
	Patch int
}

// SupportedSeries are the LTS series the operator runs, oldest first.
var SupportedSeries = []string{"8.4", "9.7"}

// DefaultMySQLVersion is the series a cluster gets when it names none.
const DefaultMySQLVersion = "8.4"

// upgradePaths lists, per series, the series MySQL can upgrade to in place: within a
// series, and from one LTS series to the next (never skipping one).
var upgradePaths = map[string][]string{
	"8.4": {"8.4", "9.7"},
	"9.7": {"9.7"},
}

// ParseMySQLVersion parses "8.4" or "8.4.6" and checks the series is supported.
func ParseMySQLVersion(s string) (MySQLVersion, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return MySQLVersion{}, fmt.Errorf("%q is not a version: want <major>.<minor> or <major>.<minor>.<patch>", s)
	}
	nums := make([]int, 3)
	nums[2] = -1
	for k, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p == "" || (len(p) > 1 && p[0] == '0') {
			return MySQLVersion{}, fmt.Errorf("%q is not a version: %q is not a number", s, p)
		}
		nums[k] = n
	}
	v := MySQLVersion{Major: nums[0], Minor: nums[1], Patch: nums[2]}
	if !v.Supported() {
		return v, fmt.Errorf("MySQL %s is not supported: supported LTS series are %s",
			v.Series(), strings.Join(SupportedSeries, ", "))
	}
	return v, nil
}

// Series is "<major>.<minor>".
func (v MySQLVersion) Series() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Supported reports whether the series is one the operator runs.
func (v MySQLVersion) Supported() bool {
	for _, s := range SupportedSeries {
		if s == v.Series() {
			return true
		}
	}
	return false
}

// String is the version as written.
func (v MySQLVersion) String() string {
	if v.Patch < 0 {
		return v.Series()
	}
	return fmt.Sprintf("%s.%d", v.Series(), v.Patch)
}

// Compare orders versions; a bare series compares equal to any release in it.
func (v MySQLVersion) Compare(o MySQLVersion) int {
	switch {
	case v.Major != o.Major:
		return cmpInt(v.Major, o.Major)
	case v.Minor != o.Minor:
		return cmpInt(v.Minor, o.Minor)
	case v.Patch < 0 || o.Patch < 0:
		return 0
	default:
		return cmpInt(v.Patch, o.Patch)
	}
}

// CanUpgradeTo reports whether MySQL supports going from v to o in place. Downgrades are
// never allowed; upgrades only within a series or to the next LTS series.
func (v MySQLVersion) CanUpgradeTo(o MySQLVersion) error {
	if o.Compare(v) < 0 {
		return fmt.Errorf("downgrading MySQL from %s to %s is not supported", v, o)
	}
	for _, s := range upgradePaths[v.Series()] {
		if s == o.Series() {
			return nil
		}
	}
	return fmt.Errorf("MySQL cannot upgrade from %s to %s in one step: upgrade through each LTS series in turn", v, o)
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
