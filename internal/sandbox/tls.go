package sandbox

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
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

// tlsListener does the TLS of the simulator itself, so that the HTTP
// server gets connections it can rewrite (see tlsConn). The HTTP server
// sees them as plain connections and speaks HTTP/1.1 or, on the HTTP/2
// preface, HTTP/2 (http.Protocols with UnencryptedHTTP2): which one the
// client chose by ALPN.
type tlsListener struct {
	net.Listener
	cfg *tls.Config
}

func (l tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := tls.Server(c, l.cfg)
	return &tlsConn{Conn: tc, tc: tc}, nil
}

// tlsConn is a server TLS connection that can turn the RST_STREAM
// INTERNAL_ERROR with which Go's HTTP/2 server aborts the stream of a
// handler that panics with http.ErrAbortHandler into RST_STREAM
// PROTOCOL_ERROR: the reset after which Go's HTTP/2 client replays a
// request it can rewind (see internal/psp, onceBody). A handler asks for
// it with resetNext, then panics.
//
// Go's HTTP/2 server gives a handler no way to pick the code of the reset
// nor to learn its stream id, so the next RST_STREAM INTERNAL_ERROR written
// on the connection is the one rewritten. When two handlers on one
// connection abort at the same moment, the codes of their two resets may
// be swapped; each stream is still reset once.
//
// It shows the HTTP server only the net.Conn methods of the TLS
// connection: with a ConnectionState method the server would take it for
// TLS and never look for the HTTP/2 preface.
type tlsConn struct {
	net.Conn // tc
	tc       *tls.Conn
	resets   atomic.Int64 // RST_STREAM INTERNAL_ERROR frames to rewrite

	wmu  sync.Mutex
	h2   int8   // 0 not known yet, 1 HTTP/2, -1 not
	skip int    // payload bytes of the current (not RST_STREAM) frame still to pass
	held []byte // bytes of an incomplete frame header or RST_STREAM frame
}

// resetNext asks that the next RST_STREAM INTERNAL_ERROR of the connection
// go out as PROTOCOL_ERROR. It reports false when the connection does not
// speak HTTP/2.
func (c *tlsConn) resetNext() bool {
	if c.tc.ConnectionState().NegotiatedProtocol != "h2" {
		return false
	}
	c.resets.Add(1)
	return true
}

func (c *tlsConn) take() bool {
	for {
		n := c.resets.Load()
		if n <= 0 {
			return false
		}
		if c.resets.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

const (
	frameHeaderLen    = 9
	frameRSTStream    = 0x3
	errCodeProtocol   = 0x1
	errCodeInternal   = 0x2
	rstStreamFrameLen = frameHeaderLen + 4
)

// Write passes the server's bytes on, following the HTTP/2 frames (the
// server's first write is its SETTINGS frame, and the handshake is over by
// then: the server reads the client's preface first). An incomplete frame
// header or RST_STREAM frame at the end of p is held back until the next
// Write completes it; the server's writes end on a frame boundary when it
// flushes, so nothing stays held.
func (c *tlsConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.h2 == 0 {
		c.h2 = -1
		if c.tc.ConnectionState().NegotiatedProtocol == "h2" {
			c.h2 = 1
		}
	}
	if c.h2 < 0 {
		return c.Conn.Write(p)
	}
	data, own := p, false
	if len(c.held) > 0 {
		data, own = append(c.held, p...), true
		c.held = nil
	}
	end := 0
	for i := 0; i < len(data); {
		if c.skip > 0 {
			n := min(c.skip, len(data)-i)
			i += n
			c.skip -= n
			end = i
			continue
		}
		if len(data)-i < frameHeaderLen {
			break
		}
		length := int(data[i])<<16 | int(data[i+1])<<8 | int(data[i+2])
		if data[i+3] != frameRSTStream {
			i += frameHeaderLen
			c.skip = length
			end = i
			continue
		}
		if len(data)-i < frameHeaderLen+length {
			break
		}
		if length == 4 && binary.BigEndian.Uint32(data[i+frameHeaderLen:]) == errCodeInternal && c.take() {
			if !own {
				data, own = append([]byte(nil), data...), true
			}
			binary.BigEndian.PutUint32(data[i+frameHeaderLen:], errCodeProtocol)
		}
		i += frameHeaderLen + length
		end = i
	}
	if end < len(data) {
		c.held = append([]byte(nil), data[end:]...)
	}
	if end > 0 {
		if _, err := c.Conn.Write(data[:end]); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

type connKey struct{}

// connContext keeps the connection in the request's context, for the
// reset and for Request.TLS.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tlsConn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

func connOf(r *http.Request) *tlsConn {
	tc, _ := r.Context().Value(connKey{}).(*tlsConn)
	return tc
}

// withTLSState fills Request.TLS, which the HTTP server leaves nil on
// connections whose TLS it did not do itself.
func withTLSState(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tc := connOf(r); tc != nil && r.TLS == nil {
			cs := tc.tc.ConnectionState()
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
