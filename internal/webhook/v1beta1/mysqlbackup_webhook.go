package v1beta1

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// SetupMySQLBackupWebhookWithManager registers the webhooks of MySQLBackup (and its
// conversion webhook).
func SetupMySQLBackupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &mysqlv1beta1.MySQLBackup{}).
		WithDefaulter(&MySQLBackupDefaulter{}).
		WithValidator(&MySQLBackupValidator{}).
		Complete()
}

// +kubebuilder:webhook:path=/mutate-mysql-dolphin-operator-io-v1beta1-mysqlbackup,mutating=true,failurePolicy=fail,sideEffects=None,groups=mysql.dolphin-operator.io,resources=mysqlbackups,verbs=create;update,versions=v1beta1,name=mmysqlbackup-v1beta1.mysql.dolphin-operator.io,admissionReviewVersions=v1

// MySQLBackupDefaulter fills defaults with MySQLBackup.Default.
type MySQLBackupDefaulter struct{}

// Default implements admission.Defaulter.
func (*MySQLBackupDefaulter) Default(_ context.Context, b *mysqlv1beta1.MySQLBackup) error {
	b.Default()
	return nil
}

// +kubebuilder:webhook:path=/validate-mysql-dolphin-operator-io-v1beta1-mysqlbackup,mutating=false,failurePolicy=fail,sideEffects=None,groups=mysql.dolphin-operator.io,resources=mysqlbackups,verbs=create;update,versions=v1beta1,name=vmysqlbackup-v1beta1.mysql.dolphin-operator.io,admissionReviewVersions=v1
// Deletions only to be audited, never held up (as for MySQLClusters).
// +kubebuilder:webhook:path=/validate-mysql-dolphin-operator-io-v1beta1-mysqlbackup,mutating=false,failurePolicy=ignore,sideEffects=None,groups=mysql.dolphin-operator.io,resources=mysqlbackups,verbs=delete,versions=v1beta1,name=vmysqlbackup-delete-v1beta1.mysql.dolphin-operator.io,admissionReviewVersions=v1,timeoutSeconds=5

// MySQLBackupValidator rejects backups that cannot be taken.
type MySQLBackupValidator struct{}

// ValidateCreate implements admission.Validator.
func (*MySQLBackupValidator) ValidateCreate(ctx context.Context, b *mysqlv1beta1.MySQLBackup) (_ admission.Warnings, err error) {
	defer func() { audit(ctx, "MySQLBackup", nil, b, err) }()
	return nil, invalid("MySQLBackup", b.Name, b.Validate())
}

// ValidateUpdate implements admission.Validator. The spec is immutable (a CEL rule on
// the CRD says so too); status and metadata may change.
func (*MySQLBackupValidator) ValidateUpdate(ctx context.Context, old, b *mysqlv1beta1.MySQLBackup) (_ admission.Warnings, err error) {
	defer func() { audit(ctx, "MySQLBackup", old, b, err) }()
	if b.DeletionTimestamp != nil {
		return nil, nil
	}
	errs := b.Validate()
	if old.Spec.Cluster != b.Spec.Cluster || old.Spec.Method != b.Spec.Method {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), "a backup's spec is immutable"))
	}
	return nil, invalid("MySQLBackup", b.Name, errs)
}

// ValidateDelete implements admission.Validator; deletion is always allowed, and audited.
func (*MySQLBackupValidator) ValidateDelete(ctx context.Context, b *mysqlv1beta1.MySQLBackup) (admission.Warnings, error) {
	audit(ctx, "MySQLBackup", nil, b, nil)
	return nil, nil
}
