package psp_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
)

// h2Fault is what the raw HTTP/2 server does once a complete POST body
// (DATA with END_STREAM) has been received, instead of answering.
type h2Fault int

const (
	h2RSTProtocol h2Fault = iota + 1 // RST_STREAM PROTOCOL_ERROR
	h2RSTRefused                     // RST_STREAM REFUSED_STREAM
	h2RSTInternal                    // RST_STREAM INTERNAL_ERROR
	h2GoAway                         // GOAWAY with a last stream id below the stream, then close
	h2Close                          // abrupt TCP close (RST)
)

func (f h2Fault) String() string {
	return map[h2Fault]string{h2RSTProtocol: "RST_STREAM PROTOCOL_ERROR", h2RSTRefused: "RST_STREAM REFUSED_STREAM",
		h2RSTInternal: "RST_STREAM INTERNAL_ERROR", h2GoAway: "GOAWAY then close", h2Close: "TCP close"}[f]
}

// rawH2 is an HTTP/2 server over TLS written with the bare Framer, so that
// it can misbehave exactly: it counts the COMPLETE request bodies it
// received per method and path, then applies its fault to every POST. GETs
// are answered 200 (the first one refused with REFUSED_STREAM when
// refuseFirstGet is set, to show that reads may be retried).
type rawH2 struct {
	fault          h2Fault
	refuseFirstGet bool
	ln             net.Listener

	mu       sync.Mutex
	complete map[string]int // "POST /path" -> complete bodies received
	conns    int
}

func startRawH2(t *testing.T, pki *testPKI, fault h2Fault, refuseFirstGet bool) *rawH2 {
	t.Helper()
	cert, _, _ := pki.issue(t, "raw-h2", false)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	s := &rawH2{fault: fault, refuseFirstGet: refuseFirstGet, ln: ln, complete: map[string]int{}}
	serveConns(t, ln, func(c net.Conn) { s.serve(c.(*tls.Conn)) })
	return s
}

// serveConns serves every connection ln accepts on its own goroutine; at
// the test's end it closes ln and waits for them all.
func serveConns(t *testing.T, ln net.Listener, serve func(net.Conn)) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
}

func (s *rawH2) url() string { return "https://" + s.ln.Addr().String() }

func (s *rawH2) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.complete[key]
}

func (s *rawH2) serve(c *tls.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil || c.ConnectionState().NegotiatedProtocol != "h2" {
		return
	}
	s.mu.Lock()
	s.conns++
	s.mu.Unlock()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		return
	}
	type stream struct {
		method, path string
		body         bytes.Buffer
	}
	streams := map[uint32]*stream{}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		var done *stream
		var id uint32
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			st := &stream{method: f.PseudoValue("method"), path: f.PseudoValue("path")}
			streams[f.StreamID] = st
			if f.StreamEnded() {
				done, id = st, f.StreamID
			}
		case *http2.DataFrame:
			st := streams[f.StreamID]
			if st == nil {
				return
			}
			st.body.Write(f.Data())
			if n := uint32(len(f.Data())); n > 0 {
				_ = fr.WriteWindowUpdate(0, n)
			}
			if f.StreamEnded() {
				done, id = st, f.StreamID
			}
		}
		if done == nil {
			continue
		}
		delete(streams, id)
		key := done.method + " " + done.path
		s.mu.Lock()
		s.complete[key]++
		n := s.complete[key]
		s.mu.Unlock()
		if done.method != http.MethodPost {
			if s.refuseFirstGet && n == 1 {
				_ = fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
				continue
			}
			body := `{"pspDepositOrderID":"WD-1","externalId":"EXT-H2","amount":"1.00","status":"Paid"}`
			var hb bytes.Buffer
			enc := hpack.NewEncoder(&hb)
			_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			_ = enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/json"})
			_ = enc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(body))})
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
			_ = fr.WriteData(id, true, []byte(body))
			continue
		}
		switch s.fault {
		case h2RSTProtocol:
			_ = fr.WriteRSTStream(id, http2.ErrCodeProtocol)
		case h2RSTRefused:
			_ = fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		case h2RSTInternal:
			_ = fr.WriteRSTStream(id, http2.ErrCodeInternal)
		case h2GoAway:
			// "Streams up to id-2 were processed": a lie that tells the
			// client this stream may be sent again elsewhere.
			_ = fr.WriteGoAway(id-2, http2.ErrCodeNo, nil)
			return
		case h2Close:
			if tc, ok := c.NetConn().(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.NetConn().Close()
			return
		}
	}
}

// TestCreateNeverReplayedOverHTTP2: whatever the HTTP/2 server does after
// it received the complete create body, the create reached it exactly once
// and the answer is Ambiguous (the status path decides).
func TestCreateNeverReplayedOverHTTP2(t *testing.T) {
	pki := newPKI(t, "h2-ca")
	type op struct {
		name string
		path string
		call func(*psp.Client) psp.Result
	}
	ops := []op{
		{"withdrawal", psp.PathWithdrawalCreate, func(c *psp.Client) psp.Result {
			return c.CreateWithdrawal(context.Background(), withdrawal("EXT-H2", "10.50", testCard))
		}},
		{"deposit", psp.PathDepositCreate, func(c *psp.Client) psp.Result {
			_, r := c.CreateDeposit(context.Background(), psp.DepositRequest{ExternalTransactionID: "DEP-H2", Amount: money.MustParse("5"), Currency: "EUR"})
			return r
		}},
	}
	for _, trust := range trustModes(pki) {
		for _, fault := range []h2Fault{h2RSTProtocol, h2RSTRefused, h2RSTInternal, h2GoAway, h2Close} {
			for _, o := range ops {
				t.Run(trust.name+"/"+fault.String()+"/"+o.name, func(t *testing.T) {
					srv := startRawH2(t, pki, fault, false)
					c := newClient(t, srv.url(), func(c *psp.Config) {
						c.Timeout = 2500 * time.Millisecond
						trust.apply(t, c)
					})
					res := o.call(c)
					if got := srv.count("POST " + o.path); got != 1 {
						t.Errorf("%d complete POST bodies reached the server, want exactly 1", got)
					}
					if res.Outcome != psp.Ambiguous || !res.Sent || res.HTTPStatus != 0 {
						t.Errorf("outcome %v sent=%v status=%d (%q), want ambiguous, sent, no status", res.Outcome, res.Sent, res.HTTPStatus, res.Message)
					}
				})
			}
		}
	}
}

// TestCreateNotSentIsRetryLater: a failure before anything was written
// (here: the client does not trust the server's certificate) stays
// RetryLater, and no body reached the server.
func TestCreateNotSentIsRetryLater(t *testing.T) {
	pki := newPKI(t, "h2-ca")
	srv := startRawH2(t, pki, h2RSTProtocol, false)
	c := newClient(t, srv.url(), nil) // system roots: the test CA is not trusted
	res := c.CreateWithdrawal(context.Background(), withdrawal("EXT-H2", "10.50", testCard))
	if res.Outcome != psp.RetryLater || res.Sent {
		t.Errorf("outcome %v sent=%v (%q), want retry_later, not sent", res.Outcome, res.Sent, res.Message)
	}
	if got := srv.count("POST " + psp.PathWithdrawalCreate); got != 0 {
		t.Errorf("%d bodies reached the server", got)
	}
}

// TestStatusMayBeRetriedOverHTTP2: a GET carries no body and creates
// nothing; Go's transport may replay it after REFUSED_STREAM, and the
// status query still works.
func TestStatusMayBeRetriedOverHTTP2(t *testing.T) {
	pki := newPKI(t, "h2-ca")
	for _, trust := range trustModes(pki) {
		t.Run(trust.name, func(t *testing.T) {
			srv := startRawH2(t, pki, h2RSTProtocol, true)
			c := newClient(t, srv.url(), func(c *psp.Config) { trust.apply(t, c) })
			res := c.WithdrawalStatus(context.Background(), "WD-1")
			if res.Outcome != psp.Created || res.HTTPStatus != 200 || res.Order.OrderID != "WD-1" {
				t.Errorf("status: %v %d %q %+v", res.Outcome, res.HTTPStatus, res.Message, res.Order)
			}
			got := srv.count("GET " + psp.PathWithdrawalStatus + "WD-1")
			if got < 2 {
				t.Errorf("status GET reached the server %d times; the first is refused, so it must have been sent again", got)
			}
			t.Logf("status GET sent %d times (refused once, then replayed by the transport)", got)
		})
	}
}

// TestCreateNeverReplayedOverHTTP1: on a REUSED keep-alive connection the
// server reads the complete create body, then closes the connection without
// a word. Go's HTTP/1.1 transport must not send the create again.
func TestCreateNeverReplayedOverHTTP1(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu        sync.Mutex
		posts     int
		firstPost int // POSTs that came as the first request of a connection
	)
	serve := func(c net.Conn) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		for n := 1; ; n++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, err = io.Copy(io.Discard, req.Body)
			if err != nil {
				return
			}
			if req.Method == http.MethodPost {
				mu.Lock()
				posts++
				if n == 1 {
					firstPost++
				}
				mu.Unlock()
				if n > 1 {
					return // the complete body was read: hang up, no answer
				}
			}
			body := `{"pspDepositOrderID":"WD-1","externalId":"EXT-1","amount":"1"}`
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		}
	}
	serveConns(t, ln, serve)

	c := newClient(t, "http://"+ln.Addr().String(), nil)
	ctx := context.Background()
	if res := c.WithdrawalStatus(ctx, "WD-1"); res.Outcome != psp.Created {
		t.Fatalf("first request on the connection: %v %q", res.Outcome, res.Message)
	}
	res := c.CreateWithdrawal(ctx, withdrawal("EXT-1", "1", testCard))
	mu.Lock()
	defer mu.Unlock()
	if posts != 1 || firstPost != 0 {
		t.Errorf("%d complete POST bodies reached the server (%d as the first request of a connection), want exactly 1 on the reused connection", posts, firstPost)
	}
	if res.Outcome != psp.Ambiguous || !res.Sent {
		t.Errorf("outcome %v sent=%v (%q), want ambiguous", res.Outcome, res.Sent, res.Message)
	}
}

// trustMode makes a client trust the test CA.
type trustMode struct {
	name  string
	apply func(testing.TB, *psp.Config)
}

func trustModes(pki *testPKI) []trustMode {
	return []trustMode{
		{"transport", func(_ testing.TB, c *psp.Config) {
			// A plain HTTP/2-capable transport, as a caller might pass.
			c.Transport = &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pki.pool}}
		}},
		{"ca-file", func(t testing.TB, c *psp.Config) {
			// The client's own transport, trusting the CA file.
			c.CAFile = pki.caFile(t)
		}},
	}
}

// captureRT records the requests handed to the transport and fails them
// before anything is written.
type captureRT struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (c *captureRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, r)
	c.mu.Unlock()
	if r.Body != nil {
		_ = r.Body.Close()
	}
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: io.EOF}
}

// TestCreateRequestNotReplayable: the requests handed to the transport
// cannot be rewound and do not claim to be idempotent.
func TestCreateRequestNotReplayable(t *testing.T) {
	rt := &captureRT{}
	c := newClient(t, "https://psp.invalid", func(c *psp.Config) { c.Transport = rt })
	ctx := context.Background()
	c.CreateWithdrawal(ctx, withdrawal("EXT-1", "1", testCard))
	c.CreateDeposit(ctx, psp.DepositRequest{ExternalTransactionID: "D-1", Amount: money.MustParse("1"), Currency: "EUR"})
	c.WithdrawalStatus(ctx, "WD-1")
	if len(rt.reqs) != 3 {
		t.Fatalf("%d requests", len(rt.reqs))
	}
	for _, r := range rt.reqs[:2] {
		if r.Method != http.MethodPost || r.GetBody != nil || r.ContentLength <= 0 {
			t.Errorf("%s %s: GetBody set=%v ContentLength=%d", r.Method, r.URL.Path, r.GetBody != nil, r.ContentLength)
		}
		for _, h := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
			if _, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
				t.Errorf("%s carries %s", r.URL.Path, h)
			}
		}
	}
	if r := rt.reqs[2]; r.Method != http.MethodGet || r.Body != nil {
		t.Errorf("status: %s body=%v", r.Method, r.Body)
	}
}

// TestUnsafeReplayableCreateRewinds: the broken client of the proof of
// safety (psp.UnsafeReplayableCreate) gives a create a GetBody that yields
// the body sent, so the transport can replay it; the zero Unsafe does not.
func TestUnsafeReplayableCreateRewinds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		unsafe psp.Unsafe
		rewind bool
	}{
		{"product", psp.Unsafe{}, false},
		{"broken", psp.UnsafeReplayableCreate(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &captureRT{}
			c := newClient(t, "https://psp.invalid", func(c *psp.Config) { c.Transport, c.Unsafe = rt, tc.unsafe })
			c.CreateWithdrawal(context.Background(), withdrawal("EXT-1", "1", testCard))
			if len(rt.reqs) != 1 {
				t.Fatalf("%d requests", len(rt.reqs))
			}
			r := rt.reqs[0]
			if got := r.GetBody != nil; got != tc.rewind {
				t.Fatalf("GetBody set = %t, want %t", got, tc.rewind)
			}
			if !tc.rewind {
				return
			}
			body, err := r.GetBody()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(body)
			if !strings.Contains(string(b), `"EXT-1"`) {
				t.Errorf("GetBody yields %q, not the create's body", b)
			}
		})
	}
}
