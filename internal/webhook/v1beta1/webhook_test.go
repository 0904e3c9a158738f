package v1beta1

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

func TestValidatorReportsEveryProblemAtOnce(t *testing.T) {
	c := &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	c.Spec.Instances = new(int32(12))
	c.Default()
	c.Spec.MySQL.Version = "5.7"
	c.Spec.MySQL.Config = map[string]string{"server_id": "1"}
	_, err := (&MySQLClusterValidator{}).ValidateCreate(t.Context(), c)
	if err == nil {
		t.Fatal("an invalid cluster was accepted")
	}
	for _, want := range []string{"spec.instances", "spec.mysql.version", "spec.mysql.config[server_id]", `MySQLCluster.mysql.dolphin-operator.io "db" is invalid`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not mention %s: %v", want, err)
		}
	}
}

func TestBackupValidatorRefusesMovingABackup(t *testing.T) {
	b := &mysqlv1beta1.MySQLBackup{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: mysqlv1beta1.MySQLBackupSpec{Cluster: "db"}}
	b.Default()
	moved := b.DeepCopy()
	moved.Spec.Cluster = "other"
	_, err := (&MySQLBackupValidator{}).ValidateUpdate(t.Context(), b, moved)
	if err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Fatalf("changing a backup's cluster must be refused, got %v", err)
	}
}
