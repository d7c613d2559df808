package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/redis/go-redis/v9"
)

// Idempotency. Every POST carries an Idempotency-Key. Its record in Redis
// (keys.Idempotency, per token) is first a lease naming the request that
// runs it (SET NX with a TTL, renewed while it runs), then the answer,
// kept Config.IdemTTL (at least 24 hours):
//
//   - the same key and the same body (SHA-256 of method, path and body)
//     replays the first answer, with Idempotent-Replayed: true;
//   - another body: 422 idempotency-key-reused;
//   - while the first still runs: 409 in-progress.
//
// A process that dies halfway leaves a lease that expires (Config.Lease):
// the retry then runs the request again, which is safe because every
// command underneath is: a batch is its content's hash and a load
// resumes; an action done before is refused as in a wrong state. A 5xx
// answer is not kept (the retry runs again).

// idemRecord is the stored record of one key.
type idemRecord struct {
	Owner    string `json:"owner,omitempty"` // set while running: the lease's owner
	Sum      string `json:"sum"`
	Status   int    `json:"status,omitempty"`
	Type     string `json:"type,omitempty"`
	Location string `json:"location,omitempty"`
	Body     []byte `json:"body,omitempty"`
}

// maxKept bounds the answer kept for a key.
const maxKept = 4 << 20

// idempotent wraps a POST handler: the key checked, the body spooled to
// a file (bounded, hashed), the record consulted, h run under the lease
// and its answer kept.
func (s *Server) idempotent(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p access.Principal) error {
		key := r.Header.Get("Idempotency-Key")
		if !validKey(key) {
			return newProblem(KindBadRequest, "every POST needs an Idempotency-Key header: 1-255 printable ASCII characters, one per intended operation")
		}
		body, sum, err := s.spool(w, r)
		if err != nil {
			return err
		}
		defer func() { body.Close(); os.Remove(body.Name()) }()
		rkey := keys.Idempotency(p.Name, hexSum([]byte(key)))
		owner, rec, err := s.acquire(r.Context(), rkey, sum)
		if err != nil {
			return err
		}
		if owner == "" {
			return replay(w, rec, sum)
		}
		r.Body = body
		return s.runLeased(w, r, p, h, rkey, owner, sum)
	}
}

func validKey(k string) bool {
	if k == "" || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

func hexSum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// spool copies the body, bounded (Config.MaxBody for a create, 64 KiB
// for an action), to a temporary file, hashing it with the method and
// path (and, given a query or a media type other than JSON, those) as it
// goes: memory stays bounded whatever the size.
func (s *Server) spool(w http.ResponseWriter, r *http.Request) (*os.File, string, error) {
	limit := int64(maxActionBody)
	if r.URL.Path == "/api/v1/batches" {
		limit = s.cfg.MaxBody
	}
	f, err := os.CreateTemp(s.cfg.Staging, "payout-api-body-*")
	if err != nil {
		return nil, "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n", r.Method, r.URL.Path)
	if mt := mediaType(r); r.URL.RawQuery != "" || (mt != "" && mt != mediaJSON) {
		// A file create: its name and media type are the request's too.
		fmt.Fprintf(h, "?%s\n%s\n", r.URL.RawQuery, mt)
	}
	_, err = io.Copy(io.MultiWriter(f, h), http.MaxBytesReader(w, r.Body, limit))
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, "", newProblem(KindTooLarge, fmt.Sprintf("the request body is over %d bytes", limit))
		}
		return nil, "", fmt.Errorf("read request body: %w", err)
	}
	return f, hex.EncodeToString(h.Sum(nil)), nil
}

// acquire takes the key's lease (owner set) or returns its record.
func (s *Server) acquire(ctx context.Context, rkey, sum string) (string, idemRecord, error) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	owner := hex.EncodeToString(b)
	lease, _ := json.Marshal(idemRecord{Owner: owner, Sum: sum})
	for range 3 {
		ok, err := s.cfg.Redis.SetNX(ctx, rkey, lease, s.cfg.Lease).Result()
		if err != nil {
			return "", idemRecord{}, fmt.Errorf("idempotency key: %w", err)
		}
		if ok {
			return owner, idemRecord{}, nil
		}
		raw, err := s.cfg.Redis.Get(ctx, rkey).Bytes()
		if errors.Is(err, redis.Nil) {
			continue // expired meanwhile: try again
		}
		if err != nil {
			return "", idemRecord{}, fmt.Errorf("idempotency key: %w", err)
		}
		var rec idemRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return "", idemRecord{}, fmt.Errorf("idempotency key record: %w", err)
		}
		return "", rec, nil
	}
	return "", idemRecord{}, newProblem(KindInProgress, "the Idempotency-Key is being taken by another request; retry")
}

// replay answers a key's record: the first answer, or why not.
func replay(w http.ResponseWriter, rec idemRecord, sum string) error {
	switch {
	case rec.Owner != "":
		return newProblem(KindInProgress, "the first request with this Idempotency-Key is still running; retry later")
	case rec.Sum != sum:
		return newProblem(KindKeyReused, "this Idempotency-Key was used with another request body (or endpoint); use a new key for a new operation")
	}
	h := w.Header()
	h.Set("Content-Type", rec.Type)
	if rec.Location != "" {
		h.Set("Location", rec.Location)
	}
	h.Set("Idempotent-Replayed", "true")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(rec.Status)
	_, err := w.Write(rec.Body)
	return err
}

// runLeased runs h under the lease (renewed while it runs), answering and
// keeping the answer; a 5xx or a 409 busy/in-progress answer drops the
// record so that a retry runs again.
func (s *Server) runLeased(w http.ResponseWriter, r *http.Request, p access.Principal, h handlerFunc, rkey, owner, sum string) error {
	ctx, stop := context.WithCancel(r.Context())
	defer stop()
	go s.renew(ctx, rkey)
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	if err := h(rec, r.WithContext(ctx), p); err != nil {
		s.fail(rec, r, err)
	}
	stop()
	kctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	keep := rec.status < 500 && rec.kind != KindBusy && rec.kind != KindInProgress && !rec.over
	final := idemRecord{Sum: sum, Status: rec.status, Type: rec.Header().Get("Content-Type"), Location: rec.Header().Get("Location"), Body: rec.buf.Bytes()}
	if err := s.settle(kctx, rkey, owner, final, keep); err != nil {
		s.cfg.Log.Error().Err(err).Str("token", p.Name).Msg("api: the answer of an Idempotency-Key could not be kept")
	}
	return nil
}

// renew extends the lease while the request runs.
func (s *Server) renew(ctx context.Context, rkey string) {
	t := time.NewTicker(s.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.cfg.Redis.PExpire(ctx, rkey, s.cfg.Lease)
		}
	}
}

// settle replaces the lease by the answer (keep) or drops it, only if the
// lease is still this request's (compare-and-set under WATCH).
func (s *Server) settle(ctx context.Context, rkey, owner string, final idemRecord, keep bool) error {
	val, _ := json.Marshal(final)
	return s.cfg.Redis.Watch(ctx, func(tx *redis.Tx) error {
		raw, err := tx.Get(ctx, rkey).Bytes()
		if errors.Is(err, redis.Nil) {
			return nil // expired: a retry may run; nothing to keep
		}
		if err != nil {
			return err
		}
		var cur idemRecord
		if json.Unmarshal(raw, &cur) != nil || cur.Owner != owner {
			return nil // another request took over the key
		}
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			if keep {
				pipe.Set(ctx, rkey, val, s.cfg.IdemTTL)
			} else {
				pipe.Del(ctx, rkey)
			}
			return nil
		})
		return err
	}, rkey)
}

// recorder passes an answer through and keeps a copy of it.
type recorder struct {
	http.ResponseWriter
	status int
	kind   string // the problem kind, when the answer is one
	buf    bytes.Buffer
	over   bool // larger than maxKept: not kept
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.buf.Len()+len(b) > maxKept {
		r.over = true
	} else {
		r.buf.Write(b)
	}
	return r.ResponseWriter.Write(b)
}
