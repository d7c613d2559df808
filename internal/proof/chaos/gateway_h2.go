package chaos

import (
	"bytes"
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
	"io"
	"log"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/sandbox/h2rst"
)

// H2Config configures the gateway's HTTP/2 front (StartH2).
type H2Config struct {
	// ResetP is the probability that a create the sandbox answered 200
	// (its order is stored) reaches the worker as a reset stream instead
	// of the answer.
	ResetP float64
	Seed   int64 // seeds the reset decisions and the choice of code
}

// h2Front is the gateway's HTTP/2-over-TLS listener. Go's HTTP/2 server
// does the protocol; the gateway does the TLS itself so that it can
// rewrite the server's frames on their way out (see package h2rst): a handler
// cannot choose the code of the RST_STREAM that ends its stream.
type h2Front struct {
	srv    *http.Server
	ln     net.Listener
	resetP float64

	mu     sync.Mutex
	rng    *mrand.Rand
	resets int
}

// StartH2 starts the gateway's HTTP/2-over-TLS front on another free
// loopback port, with a certificate for 127.0.0.1 from a CA made for the
// run, and returns that CA's certificate (PEM) for the workers to trust.
// From then on URL is the front's https:// URL. The front passes every
// request to the gateway like the plain listener; a create whose answer is
// 200 is reset with probability cfg.ResetP, with REFUSED_STREAM or
// PROTOCOL_ERROR (each half the time): the two resets after which Go's
// HTTP/2 client replays a request whose body it can rewind. The order is
// stored at the sandbox either way; a worker must find it by a status
// check, never by sending the create again.
func (g *Gateway) StartH2(cfg H2Config) ([]byte, error) {
	if cfg.ResetP < 0 || cfg.ResetP > 1 {
		return nil, errors.New("gateway: reset probability must be within [0,1]")
	}
	cert, caPEM, err := loopbackCert()
	if err != nil {
		return nil, fmt.Errorf("gateway certificate: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("gateway h2 listen: %w", err)
	}
	f := &h2Front{ln: ln, resetP: cfg.ResetP, rng: mrand.New(mrand.NewPCG(uint64(cfg.Seed), 0x4832))}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true) // the TLS is done by the listener: see package h2rst
	f.srv = &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.serve(g, w, r) }),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		Protocols:         &protos,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if rc, ok := c.(*h2rst.Conn); ok {
				return context.WithValue(ctx, rstConnKey{}, rc)
			}
			return ctx
		},
	}
	tcfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	go func() { _ = f.srv.Serve(h2rst.Listener{Listener: ln, Config: tcfg}) }()
	g.mu.Lock()
	g.h2 = f
	g.mu.Unlock()
	return caPEM, nil
}

// H2Resets returns how many create streams the HTTP/2 front reset after
// the sandbox had stored and answered the order.
func (g *Gateway) H2Resets() int {
	g.mu.Lock()
	f := g.h2
	g.mu.Unlock()
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resets
}

// serve forwards through the gateway; a create's answer is held back
// until it is known whether the stream is to be reset.
func (f *h2Front) serve(g *Gateway, w http.ResponseWriter, r *http.Request) {
	rc, _ := r.Context().Value(rstConnKey{}).(*h2rst.Conn)
	if f.resetP == 0 || r.Method != http.MethodPost || r.URL.Path != psp.PathWithdrawalCreate || rc == nil || !rc.IsH2() {
		g.ServeHTTP(w, r)
		return
	}
	rec := &recorder{header: http.Header{}}
	g.ServeHTTP(rec, r) // an upstream failure panics with http.ErrAbortHandler: the stream is reset
	if rec.code == http.StatusOK {
		f.mu.Lock()
		reset := f.rng.Float64() < f.resetP
		code := h2rst.ErrCodeRefusedStream
		if f.rng.IntN(2) == 0 {
			code = h2rst.ErrCodeProtocol
		}
		if reset {
			f.resets++
		}
		f.mu.Unlock()
		if reset {
			rc.ResetNext(code)
			panic(http.ErrAbortHandler)
		}
	}
	for k, vs := range rec.header {
		w.Header()[k] = vs
	}
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	w.WriteHeader(rec.code)
	_, _ = w.Write(rec.body.Bytes())
}

// recorder is a ResponseWriter that keeps the answer in memory.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 && code >= 200 {
		r.code = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}

func (r *recorder) Flush() {}

func (f *h2Front) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := f.srv.Shutdown(ctx); err != nil {
		_ = f.srv.Close()
	}
}

func (f *h2Front) url() string { return "https://" + f.ln.Addr().String() }

type rstConnKey struct{}

// loopbackCert makes a CA and a server certificate for 127.0.0.1 and
// localhost signed by it, valid for a day. The keys stay in memory.
func loopbackCert() (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "payout chaos gateway CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "payout chaos gateway"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}
