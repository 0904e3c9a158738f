// Package v1beta1 is version v1beta1 of the mysql.dolphin-operator.io API: the hub of
// conversion and the version the API server stores. Defaults live on the types (Default
// methods) so that the mutating webhook and the reconciler apply the same ones.
//
// +kubebuilder:object:generate=true
// +groupName=mysql.dolphin-operator.io
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of these objects.
	GroupVersion = schema.GroupVersion{Group: "mysql.dolphin-operator.io", Version: "v1beta1"}

	// SchemeBuilder registers the types of this version with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers this version's kinds.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &MySQLCluster{}, &MySQLClusterList{}, &MySQLBackup{}, &MySQLBackupList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
