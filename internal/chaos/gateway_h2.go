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
	"encoding/binary"
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
// rewrite the server's frames on their way out (see rstConn): a handler
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
	protos.SetUnencryptedHTTP2(true) // the TLS is done by the listener: see rstConn
	f.srv = &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.serve(g, w, r) }),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		Protocols:         &protos,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if rc, ok := c.(*rstConn); ok {
				return context.WithValue(ctx, rstConnKey{}, rc)
			}
			return ctx
		},
	}
	tcfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	go func() { _ = f.srv.Serve(rstListener{Listener: ln, cfg: tcfg}) }()
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
	rc, _ := r.Context().Value(rstConnKey{}).(*rstConn)
	if f.resetP == 0 || r.Method != http.MethodPost || r.URL.Path != psp.PathWithdrawalCreate || rc == nil || !rc.isH2() {
		g.ServeHTTP(w, r)
		return
	}
	rec := &recorder{header: http.Header{}}
	g.ServeHTTP(rec, r) // an upstream failure panics with http.ErrAbortHandler: the stream is reset
	if rec.code == http.StatusOK {
		f.mu.Lock()
		reset := f.rng.Float64() < f.resetP
		code := uint32(errCodeRefusedStream)
		if f.rng.IntN(2) == 0 {
			code = errCodeProtocol
		}
		if reset {
			f.resets++
		}
		f.mu.Unlock()
		if reset {
			rc.resetNext(code)
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

// rstListener does the TLS of the front's connections itself and hands
// them to the HTTP server as rstConns.
type rstListener struct {
	net.Listener
	cfg *tls.Config
}

func (l rstListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := tls.Server(c, l.cfg)
	return &rstConn{Conn: tc, tc: tc}, nil
}

// HTTP/2 frame layout (RFC 9113, section 4.1) and the error codes used.
const (
	h2FrameHeaderLen     = 9
	h2FrameRSTStream     = 0x3
	errCodeProtocol      = 0x1
	errCodeInternal      = 0x2
	errCodeRefusedStream = 0x7
)

// rstConn is a server TLS connection that follows the HTTP/2 frames the
// server writes and rewrites the error code of RST_STREAM INTERNAL_ERROR
// frames on request. Go's HTTP/2 server resets the stream of a handler
// that panics with http.ErrAbortHandler with INTERNAL_ERROR, and gives the
// handler no way to pick another code nor to learn its stream id; so a
// handler queues the code it wants (resetNext) and panics, and the next
// RST_STREAM INTERNAL_ERROR written on the connection goes out with that
// code. When two handlers of one connection abort at the same moment (one
// for an injected reset, one because the sandbox dropped the connection),
// their codes may be swapped; each stream is still reset once.
//
// It holds the TLS connection as a plain net.Conn: a connection with a
// ConnectionState method is taken by the HTTP server (Go 1.26) as TLS
// already negotiated, and never looked at for the HTTP/2 preface.
type rstConn struct {
	net.Conn
	tc *tls.Conn

	wmu   sync.Mutex
	codes []uint32 // codes queued for the next RST_STREAM INTERNAL_ERROR frames
	proto int8     // 0 not known yet, 1 HTTP/2, -1 not
	skip  int      // payload bytes of the current (not RST_STREAM) frame still to pass
	held  []byte   // an incomplete frame header or RST_STREAM frame
}

func (c *rstConn) isH2() bool { return c.tc.ConnectionState().NegotiatedProtocol == "h2" }

// resetNext queues code for the next RST_STREAM INTERNAL_ERROR frame.
func (c *rstConn) resetNext(code uint32) {
	c.wmu.Lock()
	c.codes = append(c.codes, code)
	c.wmu.Unlock()
}

// Write passes the server's bytes on, frame by frame once the connection
// speaks HTTP/2 (the server writes its first frame after the handshake
// and the client's preface). An incomplete frame header or RST_STREAM
// frame at the end of p is held back until the next Write completes it;
// the server flushes on frame boundaries, so nothing stays held.
func (c *rstConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.proto == 0 {
		c.proto = -1
		if c.isH2() {
			c.proto = 1
		}
	}
	if c.proto < 0 {
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
		if len(data)-i < h2FrameHeaderLen {
			break
		}
		length := int(data[i])<<16 | int(data[i+1])<<8 | int(data[i+2])
		if data[i+3] != h2FrameRSTStream {
			i += h2FrameHeaderLen
			c.skip = length
			end = i
			continue
		}
		if len(data)-i < h2FrameHeaderLen+length {
			break
		}
		if length == 4 && len(c.codes) > 0 && binary.BigEndian.Uint32(data[i+h2FrameHeaderLen:]) == errCodeInternal {
			if !own {
				data, own = append([]byte(nil), data...), true
			}
			binary.BigEndian.PutUint32(data[i+h2FrameHeaderLen:], c.codes[0])
			c.codes = c.codes[1:]
		}
		i += h2FrameHeaderLen + length
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
