package redisconn

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testPKI is a CA and a server certificate it signed, valid for the given
// IP addresses and DNS names.
type testPKI struct {
	caFile string
	server tls.Certificate
}

func newTestPKI(t *testing.T, ips []net.IP, names []string) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redisconn test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "redis test server"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  ips,
		DNSNames:     names,
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return testPKI{
		caFile: caFile,
		server: tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey},
	}
}

// fakeSentinel answers just enough of the Sentinel protocol for go-redis's
// failover client: it names masterAddr as the master called masterName and
// requires password (when not empty) from its clients.
type fakeSentinel struct {
	l          net.Listener
	masterName string
	masterAddr string
	password   string

	mu       sync.Mutex
	authOK   int // successful AUTH / HELLO AUTH
	authFail int
	conns    []net.Conn
	wg       sync.WaitGroup
}

func startFakeSentinel(t *testing.T, masterName, masterAddr, password string) *fakeSentinel {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeSentinel{l: l, masterName: masterName, masterAddr: masterAddr, password: password}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.close)
	return s
}

func (s *fakeSentinel) Addr() string { return s.l.Addr().String() }

func (s *fakeSentinel) close() {
	_ = s.l.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *fakeSentinel) counts() (ok, fail int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authOK, s.authFail
}

func (s *fakeSentinel) serve() {
	defer s.wg.Done()
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(c)
		}()
	}
}

func (s *fakeSentinel) handle(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	authed := s.password == ""
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		cmd := strings.ToUpper(args[0])
		var reply string
		switch {
		case cmd == "HELLO":
			reply = "-ERR unknown command 'HELLO'\r\n"
		case cmd == "AUTH":
			pw := args[len(args)-1]
			s.mu.Lock()
			if pw == s.password {
				authed = true
				s.authOK++
				reply = "+OK\r\n"
			} else {
				s.authFail++
				reply = "-WRONGPASS invalid username-password pair\r\n"
			}
			s.mu.Unlock()
		case !authed:
			reply = "-NOAUTH Authentication required.\r\n"
		case cmd == "PING":
			reply = "+PONG\r\n"
		case cmd == "CLIENT":
			reply = "+OK\r\n"
		case cmd == "SENTINEL" && len(args) >= 3 && strings.EqualFold(args[1], "get-master-addr-by-name"):
			if args[2] != s.masterName {
				reply = "*-1\r\n"
				break
			}
			host, port, _ := net.SplitHostPort(s.masterAddr)
			reply = "*2\r\n" + bulk(host) + bulk(port)
		case cmd == "SENTINEL":
			reply = "*0\r\n" // sentinels, replicas: none
		case cmd == "SUBSCRIBE":
			var b strings.Builder
			for i, ch := range args[1:] {
				b.WriteString("*3\r\n" + bulk("subscribe") + bulk(ch) + ":" + strconv.Itoa(i+1) + "\r\n")
			}
			reply = b.String()
		default:
			reply = "-ERR unknown command\r\n"
		}
		if _, err := io.WriteString(c, reply); err != nil {
			return
		}
	}
}

func bulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("want array, got %q", line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 1 {
		return nil, fmt.Errorf("bad array length %q", line)
	}
	args := make([]string, n)
	for i := range args {
		h, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		h = strings.TrimRight(h, "\r\n")
		if !strings.HasPrefix(h, "$") {
			return nil, fmt.Errorf("want bulk, got %q", h)
		}
		size, err := strconv.Atoi(h[1:])
		if err != nil || size < 0 {
			return nil, fmt.Errorf("bad bulk length %q", h)
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}
