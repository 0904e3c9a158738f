package ground

import "testing"

func TestForbiddenNamesOnlyRBACRefusals(t *testing.T) {
	logs := `{"msg":"Reconciler error","error":"pods is forbidden: User \"system:serviceaccount:dolphin-system:dolphin-controller-manager\" cannot list resource \"pods\""}
{"logger":"events","msg":"Server rejected event (will not retry!)","error":"events.events.k8s.io \"base.1\" is forbidden: unable to create new content in namespace e2e-x because it is being terminated"}
plain: secrets is forbidden: User "x" cannot get resource "secrets"
`
	got := Forbidden(logs)
	if len(got) != 2 {
		t.Fatalf("Forbidden found %d lines, want the 2 RBAC refusals: %q", len(got), got)
	}
}
