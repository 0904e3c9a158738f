package e2e_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/objectstore"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// startRestore creates a cluster of instances restored from the MySQLBackup from.
func startRestore(t *testing.T, ns, name, from string, instances int32) *mysqlv1beta1.MySQLCluster {
	t.Helper()
	c := newCluster(ns, name, mysqlv1beta1.DeletionPolicyDelete)
	c.Spec.Instances = new(instances)
	c.Spec.Bootstrap = &mysqlv1beta1.BootstrapSpec{FromBackup: &mysqlv1beta1.BootstrapFromBackup{Name: from}}
	require.NoError(t, k8s.Create(context.Background(), c))
	return c
}

// tableSums is each shop table's row count and CHECKSUM TABLE.
func tableSums(t *testing.T, d *sql.DB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, tbl := range column(t, d, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'shop'") {
		var n int64
		require.NoError(t, d.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM shop."+tbl).Scan(&n))
		var name string
		var sum sql.NullInt64
		require.NoError(t, d.QueryRowContext(context.Background(), "CHECKSUM TABLE shop."+tbl).Scan(&name, &sum))
		out[tbl] = fmt.Sprintf("%d rows, checksum %d", n, sum.Int64)
	}
	return out
}

// requireRestored waits until the restored cluster is Ready and checks that every
// instance holds the source's rows and the backup's transactions, and that the restored
// primary takes writes its replicas apply.
func requireRestored(t *testing.T, c *mysqlv1beta1.MySQLCluster, b *mysqlv1beta1.MySQLBackup, want map[string]string) {
	t.Helper()
	ctx := context.Background()
	got := readyCluster(t, c.Namespace, c.Name)
	cond := meta.FindStatusCondition(got.Status.Conditions, mysqlv1beta1.ConditionRestored)
	require.NotNil(t, cond)
	require.Equal(t, metav1.ConditionTrue, cond.Status, cond.Message)
	require.Equal(t, mysqlv1beta1.ReasonRestoreCompleted, cond.Reason)
	require.NotNil(t, got.Status.Restore)
	require.Equal(t, b.Status.GTIDSet, got.Status.Restore.GTIDSet)
	require.Equal(t, b.Status.Method, got.Status.Restore.Method)
	require.NotNil(t, got.Status.Restore.CompletedAt)
	primary := got.Status.CurrentPrimary
	require.Equal(t, c.Name+"-0", primary, "the restored instance is the first primary")
	for i := range *c.Spec.Instances {
		d := dbOf(t, c.Namespace, fmt.Sprintf("%s-%d", c.Name, i))
		require.Equal(t, want, tableSums(t, d), "instance %d holds the backup's rows", i)
		var has bool
		require.NoError(t, d.QueryRowContext(ctx, "SELECT GTID_SUBSET(?, @@gtid_executed)", b.Status.GTIDSet).Scan(&has))
		require.True(t, has, "instance %d holds the backup's transactions", i)
	}
	_, err := dbOf(t, c.Namespace, primary).ExecContext(ctx, "INSERT INTO shop.orders VALUES (100, 'after the restore')")
	require.NoError(t, err, "the restored primary takes writes")
	for i := int32(1); i < *c.Spec.Instances; i++ {
		replica := fmt.Sprintf("%s-%d", c.Name, i)
		waitFor(t, time.Minute, replica+" to apply the write", func() error {
			var n int
			if err := dbOf(t, c.Namespace, replica).QueryRowContext(ctx, "SELECT COUNT(*) FROM shop.orders WHERE id = 100").Scan(&n); err != nil || n != 1 {
				return fmt.Errorf("not yet (%d, %w)", n, err)
			}
			return nil
		})
	}
}

// tamper stores the backup's data again with one byte changed.
func tamper(t *testing.T, store *objectstore.Store, b *mysqlv1beta1.MySQLBackup) {
	t.Helper()
	ctx := context.Background()
	key := resources.RestoreKey(b)
	r, err := store.Get(ctx, key)
	require.NoError(t, err)
	raw, err := io.ReadAll(r)
	r.Close()
	require.NoError(t, err)
	raw[len(raw)/2] ^= 0x20
	_, err = store.Put(ctx, key, bytes.NewReader(raw))
	require.NoError(t, err)
}

// requireRestoreRefused waits for the restore to fail with reason, with no instance
// created.
func requireRestoreRefused(t *testing.T, c *mysqlv1beta1.MySQLCluster, reason string) {
	t.Helper()
	got := &mysqlv1beta1.MySQLCluster{}
	waitFor(t, 2*time.Minute, "the restore of "+c.Name+" to fail", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, mysqlv1beta1.ConditionRestored)
		if cond == nil || cond.Reason != reason {
			return fmt.Errorf("Restored %+v", cond)
		}
		return nil
	})
	require.Equal(t, mysqlv1beta1.PhaseFailed, got.Status.Phase)
	cond := meta.FindStatusCondition(got.Status.Conditions, mysqlv1beta1.ConditionRestored)
	require.True(t, strings.Contains(cond.Message, "SHA-256"), cond.Message)
	err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), &appsv1.StatefulSet{})
	require.True(t, apierrors.IsNotFound(err), "no instance runs on data that is not the backup: %v", err)
}
