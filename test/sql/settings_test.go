package sql_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// Every online setting is a global variable mysqld knows and lets SET GLOBAL change, with the
// value typed as the operator sends it, and reads it back in the canonical form the
// operator compares with (so a set value is not set again every pass).
func TestOnlineSettingsAreSetAndReadBackAsTheOperatorCompares(t *testing.T) {
	ctx := testContext(t)
	_, in := cluster(t, 1)
	samples := map[mysqlv1beta1.SettingKind]string{mysqlv1beta1.SettingInteger: "", mysqlv1beta1.SettingBoolean: "ON",
		mysqlv1beta1.SettingDecimal: "2.5"}
	var names []string
	for name := range mysqlv1beta1.OnlineSettings {
		names = append(names, name)
	}
	live, err := in[0].Variables(ctx, names)
	require.NoError(t, err)
	require.Len(t, live, len(names), "mysqld knows every online setting: %v", live)
	for name, kind := range mysqlv1beta1.OnlineSettings {
		raw := samples[kind]
		if kind == mysqlv1beta1.SettingInteger {
			raw = live[name] // its own value again: valid for every integer, whatever its range
			if name == "max_connections" {
				raw = "222"
			}
		}
		value, want, err := mysqlv1beta1.SettingValue(kind, raw)
		require.NoError(t, err, name)
		require.NoError(t, in[0].SetGlobal(ctx, name, value), name)
		got, err := in[0].Variables(ctx, []string{name})
		require.NoError(t, err)
		_, have, err := mysqlv1beta1.SettingValue(kind, got[name])
		require.NoError(t, err, "%s reads back as %q", name, got[name])
		require.Equal(t, want, have, name)
	}
	require.Error(t, in[0].SetGlobal(ctx, "max_connections; DROP DATABASE mysql", 1), "a name is checked before it is sent")
}
