package v1beta1

import (
	"context"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
	"github.com/dolphin-operator/dolphin/internal/resources"
)

// SetupMySQLClusterWebhookWithManager registers the defaulting and validating webhooks of
// MySQLCluster, and the conversion webhook (v1alpha1 <-> v1beta1) that comes with them.
// images are the operand images the operator runs, by which a version resolves to a release.
func SetupMySQLClusterWebhookWithManager(mgr ctrl.Manager, images resources.Images) error {
	return ctrl.NewWebhookManagedBy(mgr, &mysqlv1beta1.MySQLCluster{}).
		WithDefaulter(&MySQLClusterDefaulter{}).
		WithValidator(&MySQLClusterValidator{Reader: mgr.GetClient(), Images: images}).
		Complete()
}

// +kubebuilder:webhook:path=/mutate-mysql-dolphin-operator-io-v1beta1-mysqlcluster,mutating=true,failurePolicy=fail,sideEffects=None,groups=mysql.dolphin-operator.io,resources=mysqlclusters,verbs=create;update,versions=v1beta1,name=mmysqlcluster-v1beta1.mysql.dolphin-operator.io,admissionReviewVersions=v1

// MySQLClusterDefaulter fills defaults with MySQLCluster.Default, the same code the
// reconciler runs, and gives a cluster being created the operator's finalizer, so that its
// first reconcile need not write the cluster before it makes the children.
type MySQLClusterDefaulter struct{}

// Default implements admission.Defaulter.
func (*MySQLClusterDefaulter) Default(ctx context.Context, c *mysqlv1beta1.MySQLCluster) error {
	if set := c.Default(); len(set) > 0 {
		logf.FromContext(ctx).V(1).Info("Defaulted MySQLCluster", "name", c.Name, "fields", set)
	}
	// On create only: an update must not put back a finalizer someone removed (on a cluster
	// being deleted the API server would refuse the update).
	if req, err := admission.RequestFromContext(ctx); err == nil && req.Operation == admissionv1.Create {
		controllerutil.AddFinalizer(c, mysqlv1beta1.ClusterFinalizer)
	}
	return nil
}

// +kubebuilder:webhook:path=/validate-mysql-dolphin-operator-io-v1beta1-mysqlcluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=mysql.dolphin-operator.io,resources=mysqlclusters,verbs=create;update,versions=v1beta1,name=vmysqlcluster-v1beta1.mysql.dolphin-operator.io,admissionReviewVersions=v1
// Deletions pass the same validator only to be audited; failurePolicy=ignore so that an
// operator that does not answer never holds up a deletion (a namespace's, say).
// +kubebuilder:webhook:path=/validate-mysql-dolphin-operator-io-v1beta1-mysqlcluster,mutating=false,failurePolicy=ignore,sideEffects=None,groups=mysql.dolphin-operator.io,resources=mysqlclusters,verbs=delete,versions=v1beta1,name=vmysqlcluster-delete-v1beta1.mysql.dolphin-operator.io,admissionReviewVersions=v1,timeoutSeconds=5

// MySQLClusterValidator rejects clusters that cannot work and changes that MySQL or
// Kubernetes cannot carry out.
type MySQLClusterValidator struct {
	// Reader reads the backup and the cluster a point-in-time recovery starts from; nil
	// leaves that check to the restore.
	Reader client.Reader
	// Images resolve a spec to the MySQL release it would run, so that no change runs an
	// older one than the instances do.
	Images resources.Images
}

// ValidateCreate implements admission.Validator.
func (v *MySQLClusterValidator) ValidateCreate(ctx context.Context, c *mysqlv1beta1.MySQLCluster) (_ admission.Warnings, err error) {
	defer func() { audit(ctx, "MySQLCluster", nil, c, err) }()
	errs := append(c.Validate(), c.ValidateAnnotations()...)
	warnings, ferr := v.recoveryWindow(ctx, c)
	if ferr != nil {
		errs = append(errs, ferr)
	}
	return warnings, invalid("MySQLCluster", c.Name, errs)
}

// windowReadTimeout bounds the webhook's reads of the backup and its cluster.
const windowReadTimeout = 3 * time.Second

// recoveryWindow refuses a recovery target outside the window the backup's cluster
// reports (status.backup.firstRecoverableTime to lastRecoverableTime), or before the
// backup completed. What it cannot read (no such backup or cluster yet, or no answer in
// time) it leaves to the restore, which checks the archive itself, with a warning.
func (v *MySQLClusterValidator) recoveryWindow(ctx context.Context, c *mysqlv1beta1.MySQLCluster) (admission.Warnings, *field.Error) {
	b := c.Spec.Bootstrap
	if v.Reader == nil || b == nil || b.FromBackup == nil || b.FromBackup.TargetTime == nil {
		return nil, nil
	}
	if b.FromBackup.Name == "" {
		// Stored backups: the window is in the store, which the restore reads.
		return admission.Warnings{"the recovery target is checked when the restore runs, against the stored backups and binary log archive"}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, windowReadTimeout)
	defer cancel()
	path := field.NewPath("spec", "bootstrap", "fromBackup", "targetTime")
	target := b.FromBackup.TargetTime.UTC()
	show := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	backup := &mysqlv1beta1.MySQLBackup{}
	if err := v.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: b.FromBackup.Name}, backup); err != nil {
		return admission.Warnings{fmt.Sprintf("the recovery target is checked when the restore runs: MySQLBackup %s: %v", b.FromBackup.Name, err)}, nil
	}
	if done := backup.Status.CompletedAt; done != nil && target.Before(done.Time) {
		return nil, field.Invalid(path, show(target), fmt.Sprintf("before MySQLBackup %s completed (%s)", backup.Name, show(done.Time)))
	}
	source := &mysqlv1beta1.MySQLCluster{}
	if err := v.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: backup.Spec.Cluster}, source); err != nil {
		return admission.Warnings{fmt.Sprintf("the recovery target is checked when the restore runs: MySQLCluster %s: %v", backup.Spec.Cluster, err)}, nil
	}
	bs := source.Status.Backup
	if bs.FirstRecoverableTime == nil || bs.LastRecoverableTime == nil {
		return nil, field.Invalid(path, show(target), fmt.Sprintf(
			"MySQLCluster %s reports no recoverable window (its binary log archive continues no backup yet)", source.Name))
	}
	if target.Before(bs.FirstRecoverableTime.Time) || target.After(bs.LastRecoverableTime.Time) {
		return nil, field.Invalid(path, show(target), fmt.Sprintf("outside the window MySQLCluster %s can recover to: %s to %s",
			source.Name, show(bs.FirstRecoverableTime.Time), show(bs.LastRecoverableTime.Time)))
	}
	return nil, nil
}

// ValidateUpdate implements admission.Validator. An object being deleted may still be
// updated (finalizers come off) whatever its spec says.
func (v *MySQLClusterValidator) ValidateUpdate(ctx context.Context, old, c *mysqlv1beta1.MySQLCluster) (_ admission.Warnings, err error) {
	defer func() { audit(ctx, "MySQLCluster", old, c, err) }()
	if c.DeletionTimestamp != nil {
		return nil, nil
	}
	errs := append(c.ValidateChange(old), c.ValidateAnnotations()...)
	// Only a change of the release the spec resolves to is checked: a spec that already
	// resolved older (an operator rolled back to an older image) must still take unrelated
	// changes, such as the pin that fixes it.
	to, known := v.Images.Release(c)
	if from, ok := v.Images.Release(old); !ok || from.Compare(to) != 0 {
		errs = append(errs, c.ValidateRelease(old, to, known)...)
	}
	return nil, invalid("MySQLCluster", c.Name, errs)
}

// ValidateDelete implements admission.Validator; deletion is always allowed, and audited.
func (*MySQLClusterValidator) ValidateDelete(ctx context.Context, c *mysqlv1beta1.MySQLCluster) (admission.Warnings, error) {
	audit(ctx, "MySQLCluster", nil, c, nil)
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
