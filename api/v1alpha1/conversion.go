package v1alpha1

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// AnnotationHubData holds, on a v1alpha1 object, the v1beta1 spec and status that v1alpha1
// cannot express, so that converting back restores them. It is written only when
// something would be lost, and never appears on a v1beta1 object.
const AnnotationHubData = "mysql.dolphin-operator.io/v1beta1-data"

// hubData is what the annotation carries.
type hubData[S, T any] struct {
	Spec   S `json:"spec"`
	Status T `json:"status"`
}

// ConvertTo converts this v1alpha1 MySQLCluster to the hub version.
func (src *MySQLCluster) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*mysqlv1beta1.MySQLCluster)
	if !ok {
		return fmt.Errorf("cannot convert MySQLCluster to %T", dstRaw)
	}
	var kept hubData[mysqlv1beta1.MySQLClusterSpec, mysqlv1beta1.MySQLClusterStatus]
	meta, err := restoreHubData(&src.ObjectMeta, &kept)
	if err != nil {
		return err
	}
	dst.ObjectMeta = meta
	dst.Spec, dst.Status = kept.Spec, kept.Status
	clusterSpokeOntoHub(src, dst)
	return nil
}

// ConvertFrom converts the hub version to this v1alpha1 MySQLCluster.
func (dst *MySQLCluster) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*mysqlv1beta1.MySQLCluster)
	if !ok {
		return fmt.Errorf("cannot convert %T to MySQLCluster", srcRaw)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	clusterHubToSpoke(src, dst)
	// What comes back from the spoke alone; if it differs, the annotation keeps the rest.
	var back mysqlv1beta1.MySQLCluster
	clusterSpokeOntoHub(dst, &back)
	lossy := !equality.Semantic.DeepEqual(back.Spec, src.Spec) || !equality.Semantic.DeepEqual(back.Status, src.Status)
	return storeHubData(&dst.ObjectMeta, lossy, hubData[mysqlv1beta1.MySQLClusterSpec, mysqlv1beta1.MySQLClusterStatus]{
		Spec: src.Spec, Status: src.Status})
}

// clusterSpokeOntoHub writes every field v1alpha1 has onto dst, leaving the rest of dst
// (restored from the annotation, or empty) as it is.
func clusterSpokeOntoHub(src *MySQLCluster, dst *mysqlv1beta1.MySQLCluster) {
	s := src.Spec
	dst.Spec.Instances = copyPtr(s.Replicas)
	dst.Spec.MySQL.Version = s.Version
	dst.Spec.Storage.Size = nil
	if s.StorageSize != nil {
		q := s.StorageSize.DeepCopy()
		dst.Spec.Storage.Size = &q
	}
	if s.Backup == nil {
		dst.Spec.Backup = nil
	} else {
		if dst.Spec.Backup == nil {
			dst.Spec.Backup = &mysqlv1beta1.BackupSpec{}
		}
		dst.Spec.Backup.Schedule = s.Backup.Schedule
		dst.Spec.Backup.Suspend = !s.Backup.Enabled
		dst.Spec.Backup.Retention.Count = copyPtr(s.Backup.Retention)
	}
	st := src.Status
	dst.Status.ObservedGeneration = st.ObservedGeneration
	dst.Status.Phase = mysqlv1beta1.ClusterPhase(st.Phase)
	dst.Status.ReadyInstances = st.ReadyReplicas
	dst.Status.CurrentPrimary = st.Primary
	dst.Status.Conditions = copyConditions(st.Conditions)
}

func clusterHubToSpoke(src *mysqlv1beta1.MySQLCluster, dst *MySQLCluster) {
	s := src.Spec
	dst.Spec = MySQLClusterSpec{Replicas: copyPtr(s.Instances), Version: s.MySQL.Version}
	if s.Storage.Size != nil {
		q := s.Storage.Size.DeepCopy()
		dst.Spec.StorageSize = &q
	}
	if s.Backup != nil {
		dst.Spec.Backup = &BackupSpec{Enabled: !s.Backup.Suspend, Schedule: s.Backup.Schedule,
			Retention: copyPtr(s.Backup.Retention.Count)}
	}
	st := src.Status
	dst.Status = MySQLClusterStatus{ObservedGeneration: st.ObservedGeneration, Phase: string(st.Phase),
		ReadyReplicas: st.ReadyInstances, Primary: st.CurrentPrimary, Conditions: copyConditions(st.Conditions)}
}

// ConvertTo converts this v1alpha1 MySQLBackup to the hub version.
func (src *MySQLBackup) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*mysqlv1beta1.MySQLBackup)
	if !ok {
		return fmt.Errorf("cannot convert MySQLBackup to %T", dstRaw)
	}
	var kept hubData[mysqlv1beta1.MySQLBackupSpec, mysqlv1beta1.MySQLBackupStatus]
	meta, err := restoreHubData(&src.ObjectMeta, &kept)
	if err != nil {
		return err
	}
	dst.ObjectMeta = meta
	dst.Spec, dst.Status = kept.Spec, kept.Status
	backupSpokeOntoHub(src, dst)
	return nil
}

// ConvertFrom converts the hub version to this v1alpha1 MySQLBackup.
func (dst *MySQLBackup) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*mysqlv1beta1.MySQLBackup)
	if !ok {
		return fmt.Errorf("cannot convert %T to MySQLBackup", srcRaw)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec = MySQLBackupSpec{ClusterName: src.Spec.Cluster}
	dst.Status = MySQLBackupStatus{Phase: string(src.Status.Phase), CompletedAt: src.Status.CompletedAt.DeepCopy()}
	var back mysqlv1beta1.MySQLBackup
	backupSpokeOntoHub(dst, &back)
	lossy := !equality.Semantic.DeepEqual(back.Spec, src.Spec) || !equality.Semantic.DeepEqual(back.Status, src.Status)
	return storeHubData(&dst.ObjectMeta, lossy, hubData[mysqlv1beta1.MySQLBackupSpec, mysqlv1beta1.MySQLBackupStatus]{
		Spec: src.Spec, Status: src.Status})
}

func backupSpokeOntoHub(src *MySQLBackup, dst *mysqlv1beta1.MySQLBackup) {
	dst.Spec.Cluster = src.Spec.ClusterName
	dst.Status.Phase = mysqlv1beta1.BackupPhase(src.Status.Phase)
	dst.Status.CompletedAt = src.Status.CompletedAt.DeepCopy()
}

// restoreHubData returns src's metadata without the annotation, having decoded the
// annotation (if any) into into.
func restoreHubData(src *metav1.ObjectMeta, into any) (metav1.ObjectMeta, error) {
	meta := *src.DeepCopy()
	raw, ok := meta.Annotations[AnnotationHubData]
	if !ok {
		return meta, nil
	}
	if err := json.Unmarshal([]byte(raw), into); err != nil {
		return meta, fmt.Errorf("annotation %s does not hold v1beta1 data: %w", AnnotationHubData, err)
	}
	delete(meta.Annotations, AnnotationHubData)
	if len(meta.Annotations) == 0 {
		meta.Annotations = nil
	}
	return meta, nil
}

// storeHubData sets the annotation to data when the conversion was lossy, and removes a
// stale one otherwise.
func storeHubData(meta *metav1.ObjectMeta, lossy bool, data any) error {
	if !lossy {
		delete(meta.Annotations, AnnotationHubData)
		return nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("while keeping v1beta1 data in %s: %w", AnnotationHubData, err)
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[AnnotationHubData] = string(raw)
	return nil
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func copyConditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return nil
	}
	out := make([]metav1.Condition, len(in))
	for k := range in {
		in[k].DeepCopyInto(&out[k])
	}
	return out
}
