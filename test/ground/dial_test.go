package ground

import "testing"

func TestAPodsAddressIsDialledAtItsIP(t *testing.T) {
	if got := hostPort(podAddr("ns", "db-0")); got != "pod:ns/db-0" {
		t.Errorf("hostPort(podAddr) = %q", got)
	}
	if got := hostPort("db-primary.ns.svc"); got != "db-primary.ns.svc:3306" {
		t.Errorf("hostPort(name) = %q", got)
	}
}
