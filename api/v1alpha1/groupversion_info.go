// Package v1alpha1 is version v1alpha1 of the mysql.dolphin-operator.io API: the shape
// early users wrote, still served and converted to and from v1beta1 (the hub) without
// loss. What v1alpha1 cannot express of a v1beta1 object travels in an annotation.
//
// +kubebuilder:object:generate=true
// +groupName=mysql.dolphin-operator.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of these objects.
	GroupVersion = schema.GroupVersion{Group: "mysql.dolphin-operator.io", Version: "v1alpha1"}

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
