package main

import (
	"slices"
	"testing"
)

func TestParseOptionsReadsTheEnvironmentOLMSets(t *testing.T) {
	t.Setenv("WATCH_NAMESPACE", " team-a, team-b ,,")
	t.Setenv("ENABLE_WEBHOOKS", "false")
	o, _, err := parseOptions([]string{"--leader-elect", "--webhook-port=9999"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.watchNamespaces, []string{"team-a", "team-b"}) {
		t.Errorf("watch namespaces: %q", o.watchNamespaces)
	}
	if o.enableWebhooks || !o.leaderElect || o.webhookPort != 9999 {
		t.Errorf("unexpected options: %+v", o)
	}
}

func TestParseOptionsDefaults(t *testing.T) {
	t.Setenv("WATCH_NAMESPACE", "")
	t.Setenv("ENABLE_WEBHOOKS", "")
	o, _, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !o.enableWebhooks || len(o.watchNamespaces) != 0 || !o.secureMetrics || o.enableHTTP2 {
		t.Errorf("unexpected defaults: %+v", o)
	}
}

func TestParseOptionsRejectsAnUnknownFlag(t *testing.T) {
	if _, _, err := parseOptions([]string{"--no-such-flag"}); err == nil {
		t.Fatal("an unknown flag was accepted")
	}
}
