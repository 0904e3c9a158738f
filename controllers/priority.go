package controllers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Priorities of the passes a cluster is queued for. The queue serves higher first; an item
// queued twice keeps the higher. A user's change (a cluster created, its spec, labels or
// annotations changed) and the topology manager's report of a new primary or state keep
// the default (0). A change of one of the cluster's children (a StatefulSet's status, a
// Secret written, a Service deleted) comes after them: such a pass refreshes status or
// repairs a child, and on an operator with hundreds of clusters a burst of them (every pod
// of every new cluster turning Ready) must not hold back a new cluster's first pass, which
// makes its children. controller-runtime already queues the initial list and resyncs at
// handler.LowPriority, below both.
const priorityChildChanged = -10

// prioritized queues what h enqueues at no more than its priority (lower when h asks for
// lower), when the controller's queue is a priority queue; with a plain queue it changes
// nothing.
type prioritized struct {
	h        handler.EventHandler
	priority int
}

type requestQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (p prioritized) queue(q requestQueue) requestQueue {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		return q
	}
	return cappedQueue{PriorityQueue: pq, priority: p.priority}
}

func (p prioritized) Create(ctx context.Context, e event.CreateEvent, q requestQueue) {
	p.h.Create(ctx, e, p.queue(q))
}

func (p prioritized) Update(ctx context.Context, e event.UpdateEvent, q requestQueue) {
	p.h.Update(ctx, e, p.queue(q))
}

func (p prioritized) Delete(ctx context.Context, e event.DeleteEvent, q requestQueue) {
	p.h.Delete(ctx, e, p.queue(q))
}

func (p prioritized) Generic(ctx context.Context, e event.GenericEvent, q requestQueue) {
	p.h.Generic(ctx, e, p.queue(q))
}

// cappedQueue adds at most at its priority. It implements priorityqueue.PriorityQueue, so
// the handler it is given to still recognises a priority queue and may ask for lower.
type cappedQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	priority int
}

func (c cappedQueue) Add(item reconcile.Request) {
	c.AddWithOpts(priorityqueue.AddOpts{}, item)
}

func (c cappedQueue) AddAfter(item reconcile.Request, after time.Duration) {
	c.AddWithOpts(priorityqueue.AddOpts{After: after}, item)
}

func (c cappedQueue) AddRateLimited(item reconcile.Request) {
	c.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}

func (c cappedQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	p := c.priority
	if o.Priority != nil && *o.Priority < p {
		p = *o.Priority
	}
	o.Priority = &p
	c.PriorityQueue.AddWithOpts(o, items...)
}

// ownedBy enqueues the cluster that controls the object (as the builder's Owns would),
// after the clusters' own changes.
func ownedBy(scheme *runtime.Scheme, mapper meta.RESTMapper, owner client.Object) handler.EventHandler {
	return prioritized{priority: priorityChildChanged,
		h: handler.EnqueueRequestForOwner(scheme, mapper, owner, handler.OnlyControllerOwner())}
}
