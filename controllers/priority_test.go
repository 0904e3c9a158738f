package controllers

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mysqlv1beta1 "github.com/dolphin-operator/dolphin/api/v1beta1"
)

// A child's change queues its cluster after a cluster's own change, and the initial
// list after both; the same cluster queued twice keeps the higher priority.
func TestAChildsChangeQueuesAfterAClustersOwnChange(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, mysqlv1beta1.AddToScheme(scheme))
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(mysqlv1beta1.GroupVersion.WithKind("MySQLCluster"), meta.RESTScopeNamespace)
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	ctx := context.Background()
	child := func(cluster string, rv string) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: cluster, ResourceVersion: rv,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: mysqlv1beta1.GroupVersion.String(), Kind: "MySQLCluster",
				Name: cluster, UID: types.UID(cluster), Controller: new(true)}}}}
	}
	owned := ownedBy(scheme, mapper, &mysqlv1beta1.MySQLCluster{})
	own := handler.EnqueueRequestForObject{}

	owned.Create(ctx, event.CreateEvent{Object: child("initial", "1"), IsInInitialList: true}, q)
	owned.Update(ctx, event.UpdateEvent{ObjectOld: child("status", "1"), ObjectNew: child("status", "2")}, q)
	own.Create(ctx, event.CreateEvent{Object: &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"}}}, q)
	owned.Update(ctx, event.UpdateEvent{ObjectOld: child("both", "1"), ObjectNew: child("both", "2")}, q)
	own.Update(ctx, event.UpdateEvent{ObjectOld: &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "both", ResourceVersion: "1"}},
		ObjectNew: &mysqlv1beta1.MySQLCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "both", ResourceVersion: "2"}}}, q)

	type got struct {
		name     string
		priority int
	}
	var order []got
	for q.Len() > 0 {
		item, p, _ := q.GetWithPriority()
		order = append(order, got{item.Name, p})
		q.Done(item)
	}
	require.Len(t, order, 4)
	require.ElementsMatch(t, []got{{"new", 0}, {"both", 0}}, order[:2])
	require.Equal(t, []got{{"status", priorityChildChanged}, {"initial", handler.LowPriority}}, order[2:])
}
