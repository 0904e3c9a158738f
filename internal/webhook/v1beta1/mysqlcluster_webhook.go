package v1beta1

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// SetupMySQLClusterWebhookWithManager registers the defaulting and validating webhooks of
// MySQLCluster, and the conversion webhook (v1alpha1 <-> v1beta1) that comes with them.
func SetupMySQLClusterWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &mysqlv1beta1.MySQLCluster{}).
		WithDefaulter(&MySQLClusterDefaulter{}).
		WithValidator(&MySQLClusterValidator{}).
		Complete()
}

// +kubebuilder:webhook:path=/mutate-mysql-dolphin-operator-io-v1beta1-mysqlcluster,mutating=true,failurePolicy=fail,sideEffects=None,groups=mysql.dolphin-operator.io,resources=mysqlclusters,verbs=create;update,versions=v1beta1,name=mmysqlcluster-v1beta1.mysql.dolphin-operator.io,admissionReviewVersions=v1

// MySQLClusterDefaulter fills defaults with MySQLCluster.Default, the same code the
// reconciler runs.
type MySQLClusterDefaulter struct{}

// Default implements admission.Defaulter.
func (*MySQLClusterDefaulter) Default(ctx context.Context, c *mysqlv1beta1.MySQLCluster) error {
	if set := c.Default(); len(set) > 0 {
		logf.FromContext(ctx).V(1).Info("Defaulted MySQLCluster", "name", c.Name, "fields", set)
	}
	return nil
}

// +kubebuilder:webhook:path=/validate-mysql-dolphin-operator-io-v1beta1-mysqlcluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=mysql.dolphin-operator.io,resources=mysqlclusters,verbs=create;update,versions=v1beta1,name=vmysqlcluster-v1beta1.mysql.dolphin-operator.io,admissionReviewVersions=v1

// MySQLClusterValidator rejects clusters that cannot work and changes that MySQL or
// Kubernetes cannot carry out.
type MySQLClusterValidator struct{}

// ValidateCreate implements admission.Validator.
func (*MySQLClusterValidator) ValidateCreate(_ context.Context, c *mysqlv1beta1.MySQLCluster) (admission.Warnings, error) {
	return nil, invalid("MySQLCluster", c.Name, c.Validate())
}

// ValidateUpdate implements admission.Validator. An object being deleted may still be
// updated (finalizers come off) whatever its spec says.
func (*MySQLClusterValidator) ValidateUpdate(_ context.Context, old, c *mysqlv1beta1.MySQLCluster) (admission.Warnings, error) {
	if c.DeletionTimestamp != nil {
		return nil, nil
	}
	return nil, invalid("MySQLCluster", c.Name, c.ValidateChange(old))
}

// ValidateDelete implements admission.Validator; deletion is always allowed.
func (*MySQLClusterValidator) ValidateDelete(context.Context, *mysqlv1beta1.MySQLCluster) (admission.Warnings, error) {
	return nil, nil
}

// invalid turns a list of field errors about an object of the given kind into one
// Invalid error, or nil.
func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(mysqlv1beta1.GroupVersion.WithKind(kind).GroupKind(), name, errs)
}
