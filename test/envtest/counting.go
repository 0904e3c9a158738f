package envtest

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CountingClient passes every call through and counts the write requests (create,
// update, patch, apply, delete, on objects and their subresources), by verb and kind.
type CountingClient struct {
	client.Client
	mu     sync.Mutex
	writes []string
}

// NewCountingClient wraps c.
func NewCountingClient(c client.Client) *CountingClient { return &CountingClient{Client: c} }

func (c *CountingClient) count(verb string, obj any) {
	kind := "?"
	switch o := obj.(type) {
	case client.Object:
		kind = o.GetObjectKind().GroupVersionKind().Kind
		if kind == "" {
			kind = typeName(o)
		}
		kind += " " + o.GetName()
	case runtime.ApplyConfiguration:
		kind = typeName(o)
	}
	c.mu.Lock()
	c.writes = append(c.writes, verb+" "+kind)
	c.mu.Unlock()
}

// Writes returns the writes counted since the last Reset.
func (c *CountingClient) Writes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.writes...)
}

// Reset forgets the writes counted so far.
func (c *CountingClient) Reset() {
	c.mu.Lock()
	c.writes = nil
	c.mu.Unlock()
}

// Create counts a create.
func (c *CountingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.count("create", obj)
	return c.Client.Create(ctx, obj, opts...)
}

// Update counts an update.
func (c *CountingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.count("update", obj)
	return c.Client.Update(ctx, obj, opts...)
}

// Patch counts a patch.
func (c *CountingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.count("patch", obj)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// Apply counts a server-side apply.
func (c *CountingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.count("apply", obj)
	return c.Client.Apply(ctx, obj, opts...)
}

// Delete counts a delete.
func (c *CountingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.count("delete", obj)
	return c.Client.Delete(ctx, obj, opts...)
}

// DeleteAllOf counts a collection delete.
func (c *CountingClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	c.count("deleteallof", obj)
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

// Status returns the status subresource client, counting its writes.
func (c *CountingClient) Status() client.SubResourceWriter { return c.SubResource("status") }

// SubResource returns a subresource client that counts its writes.
func (c *CountingClient) SubResource(name string) client.SubResourceClient {
	return &countingSubResource{SubResourceClient: c.Client.SubResource(name), parent: c, name: name}
}

type countingSubResource struct {
	client.SubResourceClient
	parent *CountingClient
	name   string
}

func (s *countingSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	s.parent.count(s.name+" create", obj)
	return s.SubResourceClient.Create(ctx, obj, sub, opts...)
}

func (s *countingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.parent.count(s.name+" update", obj)
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s *countingSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.parent.count(s.name+" patch", obj)
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func (s *countingSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	s.parent.count(s.name+" apply", obj)
	return s.SubResourceClient.Apply(ctx, obj, opts...)
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }
