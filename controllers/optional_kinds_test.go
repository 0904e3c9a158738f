package controllers

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dolphin-operator/dolphin/internal/resources"
)

// countingMapper is a REST mapper that knows the kinds in served and counts every lookup
// (each lookup of a kind a real mapper does not know is a discovery request).
type countingMapper struct {
	meta.RESTMapper
	served  map[schema.GroupVersionKind]bool
	fail    error
	lookups int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.lookups++
	gvk := gk.WithVersion(versions[0])
	switch {
	case m.fail != nil:
		return nil, m.fail
	case m.served[gvk]:
		return &meta.RESTMapping{GroupVersionKind: gvk}, nil
	}
	return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
}

func TestAMissingOptionalKindIsLookedUpOnceAMinuteNotEveryPass(t *testing.T) {
	gvk := resources.ServiceMonitorGVK
	m := &countingMapper{served: map[schema.GroupVersionKind]bool{}}
	var kinds optionalKinds
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for k := range 50 { // 50 passes, a second apart
		served, err := kinds.served(m, gvk, now.Add(time.Duration(k)*time.Second))
		require.NoError(t, err)
		require.False(t, served)
	}
	require.Equal(t, 1, m.lookups, "one lookup for 50 passes within a minute")

	// The CRD installed: seen at the first pass after the minute.
	m.served[gvk] = true
	served, err := kinds.served(m, gvk, now.Add(59*time.Second))
	require.NoError(t, err)
	require.False(t, served)
	served, err = kinds.served(m, gvk, now.Add(missingKindRecheck))
	require.NoError(t, err)
	require.True(t, served)
	require.Equal(t, 2, m.lookups)

	// An API server that does not answer is an error, and is asked again next time.
	m.fail = errors.New("connection refused")
	_, err = kinds.served(m, resources.PrometheusRuleGVK, now)
	require.ErrorContains(t, err, "while looking up PrometheusRule")
	_, err = kinds.served(m, resources.PrometheusRuleGVK, now)
	require.Error(t, err)
	require.Equal(t, 4, m.lookups)
}
