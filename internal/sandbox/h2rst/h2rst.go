// Package h2rst lets a Go HTTP/2 server reset a stream with a code of its
// choosing, which the standard server cannot do: it is what the PSP
// simulator and the chaos suite use to send the resets after which a
// careless client replays a request (RST_STREAM PROTOCOL_ERROR or
// REFUSED_STREAM after the whole body was received).
//
// Go's HTTP/2 server resets the stream of a handler that panics with
// http.ErrAbortHandler with INTERNAL_ERROR, and tells the handler neither
// how to pick another code nor its stream id. So the server's listener
// does the TLS itself and hands out Conns that follow the HTTP/2 frames
// the server writes; a handler queues the code it wants (ResetNext) and
// panics, and the next RST_STREAM INTERNAL_ERROR written on the connection
// goes out with that code. When two handlers of one connection abort at
// the same moment, their codes may be swapped; each stream is still reset
// once.
//
// The HTTP server must accept HTTP/2 without TLS of its own
// (http.Protocols.SetUnencryptedHTTP2): it sees a Conn as a plain
// connection (a ConnectionState method would make it take the connection
// for TLS already negotiated and never look for the HTTP/2 preface) and
// speaks HTTP/1.1 or HTTP/2, whichever the client chose by ALPN.
package h2rst

import (
	"crypto/tls"
	"encoding/binary"
	"net"
	"sync"
)

// HTTP/2 error codes (RFC 9113, section 7).
const (
	ErrCodeProtocol      uint32 = 0x1
	ErrCodeInternal      uint32 = 0x2
	ErrCodeRefusedStream uint32 = 0x7
)

// HTTP/2 frame layout (RFC 9113, section 4.1).
const (
	frameHeaderLen = 9
	frameRSTStream = 0x3
)

// Listener does the TLS of its connections and hands them out as *Conn.
type Listener struct {
	net.Listener
	Config *tls.Config
}

// Accept returns the next connection as a *Conn.
func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := tls.Server(c, l.Config)
	return &Conn{Conn: tc, tc: tc}, nil
}

// Conn is a server TLS connection that rewrites the error code of the
// RST_STREAM INTERNAL_ERROR frames it was asked to.
type Conn struct {
	net.Conn
	tc *tls.Conn

	wmu   sync.Mutex
	codes []uint32 // codes queued for the next RST_STREAM INTERNAL_ERROR frames
	proto int8     // 0 not known yet, 1 HTTP/2, -1 not
	skip  int      // payload bytes of the current (not RST_STREAM) frame still to pass
	held  []byte   // an incomplete frame header or RST_STREAM frame
}

// State returns the TLS connection state.
func (c *Conn) State() tls.ConnectionState { return c.tc.ConnectionState() }

// IsH2 reports whether the client chose HTTP/2.
func (c *Conn) IsH2() bool { return c.State().NegotiatedProtocol == "h2" }

// ResetNext queues code for the next RST_STREAM INTERNAL_ERROR frame of
// the connection; the caller then panics with http.ErrAbortHandler. It
// reports false, queuing nothing, when the connection is not HTTP/2.
func (c *Conn) ResetNext(code uint32) bool {
	if !c.IsH2() {
		return false
	}
	c.wmu.Lock()
	c.codes = append(c.codes, code)
	c.wmu.Unlock()
	return true
}

// Write passes the server's bytes on, frame by frame once the connection
// speaks HTTP/2 (the server writes its first frame after the handshake and
// the client's preface). An incomplete frame header or RST_STREAM frame at
// the end of p is held back until the next Write completes it; the server
// flushes on frame boundaries, so nothing stays held.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.proto == 0 {
		c.proto = -1
		if c.IsH2() {
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
		if length == 4 && len(c.codes) > 0 && binary.BigEndian.Uint32(data[i+frameHeaderLen:]) == ErrCodeInternal {
			if !own {
				data, own = append([]byte(nil), data...), true
			}
			binary.BigEndian.PutUint32(data[i+frameHeaderLen:], c.codes[0])
			c.codes = c.codes[1:]
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
