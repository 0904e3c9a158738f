package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const manifests = `apiVersion: v1
kind: Namespace
metadata:
  name: dolphin-system
---
apiVersion: v1
kind: ServiceAccount
metadata:
  labels:
    app.kubernetes.io/managed-by: kustomize
    app.kubernetes.io/name: dolphin-operator
  name: dolphin-controller-manager
  namespace: dolphin-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: dolphin-webhook-cert
  namespace: dolphin-system
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: dolphin-manager-rolebinding
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: dolphin-manager-role}
subjects:
- {kind: ServiceAccount, name: dolphin-controller-manager, namespace: dolphin-system}
---
apiVersion: v1
kind: Service
metadata:
  labels: {control-plane: controller-manager}
  name: dolphin-webhook-service
  namespace: dolphin-system
spec: {ports: [{port: 443}]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: dolphin-validating-webhook-configuration
webhooks:
- name: v.example.io
  clientConfig: {service: {name: dolphin-webhook-service, namespace: dolphin-system, path: /validate}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.io
spec:
  conversion:
    webhook:
      clientConfig: {service: {name: dolphin-webhook-service, namespace: dolphin-system}}
`

func TestRenderTemplatesTheNamespaceAndLabelsAndKeepsTheCRDs(t *testing.T) {
	objs, err := decode(strings.NewReader(manifests))
	require.NoError(t, err)
	files, err := render(objs, "1.2.3")
	require.NoError(t, err)
	require.Contains(t, string(files["Chart.yaml"]), "version: 1.2.3\nappVersion: \"1.2.3\"")
	crd := string(files["crds/things.example.io.yaml"])
	require.Contains(t, crd, "namespace: dolphin-system", "crds/ are not templated")

	for _, path := range []string{"templates/rbac.yaml", "templates/services.yaml", "templates/webhooks.yaml"} {
		text := string(files[path])
		require.NotContains(t, text, "dolphin-system", path)
		require.NotContains(t, text, "kustomize", path)
		require.Contains(t, text, `{{- include "dolphin-operator.labels" . | nindent 4 }}`, path)
	}
	rbac := string(files["templates/rbac.yaml"])
	require.Contains(t, rbac, "  namespace: {{ .Release.Namespace }}\n")
	require.Contains(t, rbac, "{{- if not .Values.certManager.enabled }}\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\n",
		"the certificate Secret's Role only without cert-manager")
	require.Contains(t, string(files["templates/services.yaml"]), "nindent 4 }}\n    control-plane: controller-manager\n",
		"labels other than kustomize's are kept")
	require.Contains(t, string(files["templates/webhooks.yaml"]), "namespace: {{ .Release.Namespace }}\n      path: /validate")
}

func TestRenderRefusesWhatTheChartHasNoPlaceFor(t *testing.T) {
	objs, err := decode(strings.NewReader(manifests + "---\napiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: stray\n"))
	require.NoError(t, err)
	_, err = render(objs, "1.2.3")
	require.ErrorContains(t, err, "CronJob (stray)")

	_, err = decode(strings.NewReader("apiVersion: v1\nkind: ConfigMap\n"))
	require.ErrorContains(t, err, "no kind or name")
	require.ErrorContains(t, run("charts/x", "", "-"), "--version is required")
}
