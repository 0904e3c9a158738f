package pki

import (
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestIssueAndCheck(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("test CA", now, 48*time.Hour, nil)
	require.NoError(t, err)
	server, err := IssueServer(ca, []string{"a.example", "b.example"}, now, 24*time.Hour, nil)
	require.NoError(t, err)
	require.Equal(t, "a.example", server.Cert.Subject.CommonName)

	_, ok := UsableCA(ca.CertPEM, ca.KeyPEM, now, time.Hour)
	require.True(t, ok)
	_, ok = UsableCA(server.CertPEM, server.KeyPEM, now, time.Hour)
	require.False(t, ok, "a leaf is not a CA")
	_, ok = UsableCA(ca.CertPEM, ca.KeyPEM, now.Add(47*time.Hour+30*time.Minute), time.Hour)
	require.False(t, ok, "inside the renewal window")

	_, ok = UsableServer(server.CertPEM, server.KeyPEM, ca, []string{"b.example"}, now, time.Hour)
	require.True(t, ok)
	_, ok = UsableServer(server.CertPEM, server.KeyPEM, ca, []string{"c.example"}, now, time.Hour)
	require.False(t, ok, "a name is missing")
	other, err := NewCA("other CA", now, 48*time.Hour, nil)
	require.NoError(t, err)
	_, ok = UsableServer(server.CertPEM, server.KeyPEM, other, nil, now, time.Hour)
	require.False(t, ok, "signed by another CA")

	_, err = IssueServer(ca, nil, now, time.Hour, nil)
	require.Error(t, err)
	_, err = Parse([]byte("nope"), nil)
	require.Error(t, err)
}

func TestIssueClientAndAddresses(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("test CA", now, 48*time.Hour, nil)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)

	client, err := Issue(ca, Request{CommonName: "system:node:n0", Organization: []string{"system:nodes"},
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, now, time.Hour, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"system:nodes"}, client.Cert.Subject.Organization)
	_, err = client.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	_, err = client.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.Error(t, err, "a client certificate does not serve")

	server, err := Issue(ca, Request{CommonName: "n0", DNSNames: []string{"n0"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.2")},
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, now, time.Hour, nil)
	require.NoError(t, err)
	require.NoError(t, server.Cert.VerifyHostname("10.0.0.2"))
	require.Error(t, server.Cert.VerifyHostname("10.0.0.3"))

	_, err = Issue(ca, Request{CommonName: "x"}, now, time.Hour, nil)
	require.ErrorContains(t, err, "usage")
}
