package webhookcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

// ServingTimeout bounds one readiness probe's handshake with the webhook server.
const ServingTimeout = time.Second

// Serving is a readiness check: the webhook server at addr must serve the certificate
// certFile holds now. Whoever rotates it (this package's Rotator, OLM or cert-manager)
// writes a new file and puts the new CA where the API server reads it; a server still
// serving the old certificate then fails every admission and conversion call, and a pod
// doing that must not be an endpoint of the webhook Service.
func Serving(addr, certFile string) func(*http.Request) error {
	return func(r *http.Request) error {
		want, err := leafDER(certFile)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(r.Context(), ServingTimeout)
		defer cancel()
		// Not verified: the check compares the served certificate with the file's byte
		// for byte, which is stricter than any chain check.
		d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // see above
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("the webhook server at %s: %w", addr, err)
		}
		defer conn.Close()
		peers := conn.(*tls.Conn).ConnectionState().PeerCertificates
		if len(peers) == 0 {
			return fmt.Errorf("the webhook server at %s served no certificate", addr)
		}
		if !bytes.Equal(peers[0].Raw, want) {
			return fmt.Errorf("the webhook server at %s serves the certificate of serial %x (not after %s), not the one in %s",
				addr, peers[0].SerialNumber, peers[0].NotAfter.UTC().Format(time.RFC3339), certFile)
		}
		return nil
	}
}

// leafDER is the first certificate of a PEM file: the server's own, before any chain.
func leafDER(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the webhook server's certificate: %w", err)
	}
	for {
		var b *pem.Block
		b, raw = pem.Decode(raw)
		if b == nil {
			return nil, errors.New("the webhook server's certificate: " + path + " holds no PEM certificate")
		}
		if b.Type == "CERTIFICATE" {
			return b.Bytes, nil
		}
	}
}
