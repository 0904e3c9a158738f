package controllers

import (
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// warningRepeat is how often the same Warning about one cluster (the same reason, for
// the same step or spec error) is emitted again while it lasts: a failing step is retried
// with backoff and an invalid spec on every change the cluster's children see, and one
// Event for the episode says it, not one a pass.
const warningRepeat = 10 * time.Minute

// warnings remembers when each Warning was last emitted, by cluster UID and what it says.
type warnings struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// due says whether the Warning about the cluster keyed by what is to be emitted now, and
// if so records it as emitted.
func (w *warnings) due(uid types.UID, what string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := string(uid) + "/" + what
	if at, ok := w.last[key]; ok && now.Sub(at) < warningRepeat {
		return false
	}
	if w.last == nil {
		w.last = map[string]time.Time{}
	}
	w.last[key] = now
	return true
}

// forget drops what is remembered of a deleted cluster.
func (w *warnings) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key := range w.last {
		if strings.HasPrefix(key, string(uid)+"/") {
			delete(w.last, key)
		}
	}
}
