package sandbox

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/acme/payout/internal/sandbox/h2rst"
)

// WriteSelfSigned writes a new self-signed certificate (ECDSA P-256, valid
// 30 days, for 127.0.0.1, ::1, localhost and the given extra hosts) to
// certFile and its key to keyFile (mode 0600). The certificate is its own
// CA: a client trusts the simulator with certFile as its CA file
// (payout --psp-ca-file).
func WriteSelfSigned(certFile, keyFile string, hosts ...string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return fmt.Errorf("serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "psp-sandbox"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !ip.IsUnspecified() {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("create certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode key: %w", err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("write certificate: %w", err)
	}
	return nil
}

type connKey struct{}

// connContext keeps the connection in the request's context, for the
// reset (h2rst.Conn.ResetNext) and for Request.TLS.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*h2rst.Conn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

func connOf(r *http.Request) *h2rst.Conn {
	tc, _ := r.Context().Value(connKey{}).(*h2rst.Conn)
	return tc
}

// withTLSState fills Request.TLS, which the HTTP server leaves nil on
// connections whose TLS it did not do itself.
func withTLSState(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tc := connOf(r); tc != nil && r.TLS == nil {
			cs := tc.State()
			r.TLS = &cs
		}
		h.ServeHTTP(w, r)
	})
}

// serverTLS loads (or first writes, with TLSGenerate) the simulator's
// certificate. TLS 1.2 at least; ALPN h2 and http/1.1.
func serverTLS(cfg Config, addr net.Addr) (*tls.Config, error) {
	if cfg.TLSGenerate {
		var hosts []string
		if ta, ok := addr.(*net.TCPAddr); ok {
			hosts = append(hosts, ta.IP.String())
		}
		if err := WriteSelfSigned(cfg.TLSCertFile, cfg.TLSKeyFile, hosts...); err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
	}
	pair, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s / key %s: %w", cfg.TLSCertFile, cfg.TLSKeyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}, nil
}

var errTLSHalf = errors.New("give both --tls-cert and --tls-key, or neither")
