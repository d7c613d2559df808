package psp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/rs/zerolog"
)

// ErrTLSFiles is matched (errors.Is) by every error of reading the CA,
// client certificate or key file. Such errors name the file, never its
// content.
var ErrTLSFiles = errors.New("psp tls files unusable")

// fileStamp identifies a version of a file the way FileToken does: by its
// modification time and size. A file rewritten in place or replaced by a
// rename gets a new stamp.
type fileStamp struct {
	mod  int64 // modification time, Unix nanoseconds (comparable with ==)
	size int64
}

func stampOf(path string) (fileStamp, error) {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{st.ModTime().UnixNano(), st.Size()}, nil
}

// tlsFiles holds the trust roots and the client certificate read from
// files, and reads them again when one of the files changes (new
// modification time or size), like FileToken: every new TLS handshake asks
// for the current ones, so a rotated certificate or CA is used from the
// next connection on, without a restart.
//
// A rotation is often two writes (certificate, then key): between them the
// pair does not match. A set of files that does not load while an earlier
// set did keeps the earlier one in use (logged once per change) and is
// tried again at the next handshake; a set that never loaded fails the
// handshake, before anything is sent.
type tlsFiles struct {
	ca, cert, key string
	log           zerolog.Logger

	mu     sync.Mutex
	loaded bool
	stamps [3]fileStamp
	bad    [3]fileStamp // stamps of the last set that failed, to log it once
	roots  *x509.CertPool
	pair   *tls.Certificate
}

func (f *tlsFiles) paths() [3]string { return [3]string{f.ca, f.cert, f.key} }

// current returns the trust roots (nil: none configured) and the client
// certificate (nil: none configured), re-read if a file changed.
func (f *tlsFiles) current() (*x509.CertPool, *tls.Certificate, error) {
	var now [3]fileStamp
	var statErr error
	for i, p := range f.paths() {
		if p == "" {
			continue
		}
		s, err := stampOf(p)
		if err != nil {
			statErr = fmt.Errorf("%w: %w", ErrTLSFiles, err)
			break
		}
		now[i] = s
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if statErr == nil && f.loaded && now == f.stamps {
		return f.roots, f.pair, nil
	}
	err := statErr
	if err == nil {
		var roots *x509.CertPool
		var pair *tls.Certificate
		if roots, pair, err = f.read(); err == nil {
			f.loaded, f.stamps, f.roots, f.pair = true, now, roots, pair
			f.log.Info().Str("ca_file", f.ca).Str("client_cert_file", f.cert).Msg("psp tls files loaded")
			return roots, pair, nil
		}
	}
	if !f.loaded {
		return nil, nil, err
	}
	if now != f.bad {
		f.bad = now
		f.log.Warn().Err(err).Msg("psp tls files changed but do not load: the previous CA and client certificate stay in use")
	}
	return f.roots, f.pair, nil
}

func (f *tlsFiles) read() (*x509.CertPool, *tls.Certificate, error) {
	var roots *x509.CertPool
	if f.ca != "" {
		b, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrTLSFiles, err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(b) {
			return nil, nil, fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrTLSFiles, f.ca)
		}
	}
	var pair *tls.Certificate
	if f.cert != "" {
		// The key file's content never appears in an error: tls.LoadX509KeyPair
		// only reports what is wrong with it.
		p, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: client certificate %s / key %s: %w", ErrTLSFiles, f.cert, f.key, err)
		}
		pair = &p
	}
	return roots, pair, nil
}

// tlsConfig is the TLS configuration of the client's own transport:
// TLS 1.2 at least, always. With a CA file the server's certificate is
// verified against the CA file's certificates instead of the system roots,
// for serverName (the host of the base URL: the client talks to no other,
// and follows no redirect); with a client certificate it is presented when
// the server asks for one.
func tlsConfig(files *tlsFiles, serverName string) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if files == nil {
		return cfg
	}
	if files.cert != "" {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			_, pair, err := files.current()
			if err != nil {
				return nil, err
			}
			return pair, nil
		}
	}
	if files.ca != "" {
		// RootCAs cannot change after the config is in use, so the
		// standard verification is replaced by the same one against the
		// roots of the moment. VerifyConnection runs on every handshake,
		// resumed ones included; the name checked is the base URL's host,
		// not the connection state's ServerName (empty for an IP address,
		// which would skip the host check).
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			roots, _, err := files.current()
			if err != nil {
				return err
			}
			if len(cs.PeerCertificates) == 0 {
				return errors.New("psp tls: the server sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: roots, DNSName: serverName, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
				return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
			}
			return nil
		}
	}
	return cfg
}
