package controllers

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// missingKindRecheck is how long an optional kind the API server lacked (the Prometheus
// Operator's, whose CRDs may be installed any time) is taken as missing before the REST
// mapper is asked again. The mapper answers a kind it knows from memory but asks the
// server's discovery again on every lookup of one it does not: without this, every pass
// of every cluster would cost a discovery GET per missing kind.
const missingKindRecheck = time.Minute

// optionalKinds remembers which optional kinds were missing, and since when.
type optionalKinds struct {
	mu      sync.Mutex
	missing map[schema.GroupVersionKind]time.Time
}

// served says whether the API server serves the kind, as mapper answered within the
// last missingKindRecheck for a missing kind, or now.
func (o *optionalKinds) served(mapper meta.RESTMapper, gvk schema.GroupVersionKind, now time.Time) (bool, error) {
	o.mu.Lock()
	since, known := o.missing[gvk]
	o.mu.Unlock()
	if known && now.Sub(since) < missingKindRecheck {
		return false, nil
	}
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err == nil:
		delete(o.missing, gvk)
		return true, nil
	case meta.IsNoMatchError(err):
		if o.missing == nil {
			o.missing = map[schema.GroupVersionKind]time.Time{}
		}
		o.missing[gvk] = now
		return false, nil
	}
	return false, fmt.Errorf("while looking up %s: %w", gvk.Kind, err)
}
