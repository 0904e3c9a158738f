package controllers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTheWatchdogFailsWhileAReconcileRunsPastItsBound(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	w := &Watchdog{StuckAfter: time.Minute, Now: func() time.Time { return now }}
	quick := w.Start("MySQLCluster ns/a")
	stuck := w.Start("MySQLBackup ns/b")
	quick()
	now = now.Add(time.Minute)
	require.NoError(t, w.Check(), "at the bound, not past it")
	now = now.Add(time.Second)
	require.ErrorContains(t, w.Check(), "the reconcile of MySQLBackup ns/b has run for 1m1s")
	stuck()
	require.NoError(t, w.Check(), "once it ends")
	var none *Watchdog
	none.Start("x")()
	require.NoError(t, none.Check())
}
