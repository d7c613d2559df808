package ui_test

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/view"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/xuri/excelize/v2"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/operator"
	"github.com/acme/payout/internal/proof/testenv/fakeredis"
	"github.com/acme/payout/internal/proof/uitest"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/jobs"
)

const (
	opUser = "alice"
	opPass = "alice-Pa55word"
)

const threeRows = "externalId,amount,cardNumber,telecomOperator\n" +
	"UI-1,10.50,4111 1111 1111 1111,\n" +
	"UI-2,20,,MTS\n" +
	"UI-3,0.01,5555-5555-5555-4444,\n"

type env struct {
	t   *testing.T
	rdb *redis.Client
	led *ledger.Ledger
	h   http.Handler
	// user and pass sign the requests in (opUser, opPass when empty).
	user, pass string
}

// as is e with the requests signed in as user.
func (e *env) as(user, pass string) *env {
	c := *e
	c.user, c.pass = user, pass
	return &c
}

func newEnv(t *testing.T, o uitest.Options) *env {
	t.Helper()
	rdb := fakeredis.Working(t)
	o.User, o.Password = opUser, opPass
	h, err := ui.New(uitest.Config(t, rdb, o))
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, rdb: rdb, led: ledger.New(rdb), h: h}
}

// hold loads content as a batch awaiting approval, loaded by by.
func (e *env) hold(name, content, by string) string {
	e.t.Helper()
	p := filepath.Join(e.t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		e.t.Fatal(err)
	}
	ld := loader.New(e.led, queue.New(e.rdb), vault.Ephemeral(), zerolog.Nop())
	res, err := ld.LoadFile(context.Background(), p, loader.Options{Approval: loader.Approval{Required: true, By: by}})
	if err != nil || !res.Loaded || res.Held == "" {
		e.t.Fatalf("load: %v %+v", err, res)
	}
	return res.Batch
}

// do sends r as the signed-in operator's browser would: with basic auth
// and Sec-Fetch-Site (the UI's own pages).
func (e *env) do(r *http.Request) *httptest.ResponseRecorder {
	if e.user != "" {
		r.SetBasicAuth(e.user, e.pass)
	} else {
		r.SetBasicAuth(opUser, opPass)
	}
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	r.RemoteAddr = "192.0.2.1:40000"
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

func (e *env) post(path string, form url.Values) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return e.do(r)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// page returns /batches and the CSRF token of its forms ("" if none).
func (e *env) page() (string, string) {
	e.t.Helper()
	w := e.do(httptest.NewRequest("GET", "/batches", nil))
	if w.Code != 200 {
		e.t.Fatalf("GET /batches: %d", w.Code)
	}
	body := w.Body.String()
	if m := csrfRE.FindStringSubmatch(body); m != nil {
		return body, html.UnescapeString(m[1])
	}
	return body, ""
}

func (e *env) phase(id string) string {
	e.t.Helper()
	b, err := e.led.Batch(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return b.Phase
}

func (e *env) pending(queue string) int {
	info, err := asynq.NewInspectorFromRedisClient(e.rdb).GetQueueInfo(queue)
	if err != nil {
		return 0
	}
	return info.Pending
}

// decisions lists who moved the batch out of awaiting approval, and where
// to, as "[ACTOR -> PHASE ...]".
func decisions(entries []ledger.AuditEntry) string {
	var out []string
	for _, a := range entries {
		if a.From == lifecycle.PhaseAwaiting {
			out = append(out, a.Actor+" -> "+a.To)
		}
	}
	return fmt.Sprint(out)
}

func (e *env) audit(batch string) []ledger.AuditEntry {
	e.t.Helper()
	var out []ledger.AuditEntry
	if err := e.led.Audit().Each(context.Background(), batch, "", func(a ledger.AuditEntry) error {
		out = append(out, a)
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func TestApproveFromTheUI(t *testing.T) {
	e := newEnv(t, uitest.Options{})
	id := e.hold("approve.csv", threeRows, "bob")
	body, tok := e.page()
	if tok == "" || !strings.Contains(body, "/batches/"+id+"/approve") || !strings.Contains(body, "/batches/"+id+"/discard") {
		t.Fatalf("no approval forms for %s:\n%s", id, body)
	}
	for name, form := range map[string]url.Values{"missing": {}, "bad": {"csrf": {tok + "x"}}} {
		if w := e.post("/batches/"+id+"/approve", form); w.Code != http.StatusForbidden {
			t.Errorf("%s CSRF token: %d, want 403", name, w.Code)
		}
	}
	if ph := e.phase(id); ph != lifecycle.PhaseAwaiting || e.pending(jobs.Queue) != 0 {
		t.Fatalf("refused posts changed the batch: %s, %d tasks", ph, e.pending(jobs.Queue))
	}
	w := e.post("/batches/"+id+"/approve", url.Values{"csrf": {tok}, "confirm": {"yes"}})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "approved by "+opUser+": 3 payouts") {
		t.Fatalf("approve: %d %s", w.Code, w.Body.String())
	}
	w = e.post("/batches/"+id+"/approve", url.Values{"csrf": {tok}, "confirm": {"yes"}})
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "not awaiting approval") {
		t.Fatalf("second approve: %d %s", w.Code, w.Body.String())
	}
	if n := e.pending(jobs.Queue); n != 3 || e.phase(id) != lifecycle.PhaseLoaded {
		t.Fatalf("after two approvals: %d creates enqueued (want 3), phase %s", n, e.phase(id))
	}
	if got := decisions(e.audit(id)); got != "[alice -> loaded]" {
		t.Fatalf("audit of the approval: %v", got)
	}
}

// An approval recorded whose creates could not be enqueued is done: the
// ledger is the truth and the workers' reconciler enqueues the creates.
func TestApproveNotEnqueuedIsDone(t *testing.T) {
	rdb := fakeredis.Working(t)
	qrdb := fakeredis.Refusing(t)
	cfg := uitest.Config(t, rdb, uitest.Options{User: opUser, Password: opPass})
	cfg.Controls = operator.UIControls{Actions: &operator.Actions{Ledger: ledger.New(rdb),
		Queue: queue.New(qrdb), Log: zerolog.Nop()}}
	h, err := ui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, rdb: rdb, led: ledger.New(rdb), h: h}
	id := e.hold("partly.csv", threeRows, "bob")
	_, tok := e.page()
	w := e.post("/batches/"+id+"/approve", url.Values{"csrf": {tok}, "confirm": {"yes"}})
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, "approved by "+opUser) || !strings.Contains(body, operator.LeftToReconciler) ||
		!strings.Contains(body, `class="msg notice"`) || strings.Contains(body, "LOADING") {
		t.Fatalf("approval whose creates were not enqueued: %d\n%s", w.Code, body)
	}
	if ph := e.phase(id); ph != lifecycle.PhaseLoaded {
		t.Fatalf("phase after the approval: %s", ph)
	}
}

func TestDiscardFromTheUI(t *testing.T) {
	e := newEnv(t, uitest.Options{})
	id := e.hold("discard.csv", threeRows, "bob")
	_, tok := e.page()
	if w := e.post("/batches/"+id+"/discard", url.Values{"csrf": {"nope"}, "note": {"wrong file"}}); w.Code != http.StatusForbidden {
		t.Fatalf("bad CSRF: %d", w.Code)
	}
	if w := e.post("/batches/"+id+"/discard", url.Values{"csrf": {tok}, "note": {"  "}}); w.Code != http.StatusConflict {
		t.Fatalf("no note: %d", w.Code)
	}
	if ph := e.phase(id); ph != lifecycle.PhaseAwaiting {
		t.Fatalf("refused discards changed the batch: %s", ph)
	}
	w := e.post("/batches/"+id+"/discard", url.Values{"csrf": {tok}, "note": {"wrong file"}})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "3 payouts cancelled") {
		t.Fatalf("discard: %d %s", w.Code, w.Body.String())
	}
	cancelled := 0
	for _, a := range e.audit(id) {
		if a.To == string(lifecycle.Cancelled) && a.Actor == opUser {
			cancelled++
		}
	}
	if cancelled != 3 || e.phase(id) != lifecycle.PhaseDiscarded || e.pending(jobs.Queue) != 0 {
		t.Fatalf("after discard: %d cancelled by %s, phase %s, %d tasks", cancelled, opUser, e.phase(id), e.pending(jobs.Queue))
	}
}

// Every form acting on a batch or an upload goes through the same guard:
// its CSRF token, its target's pattern, the feature configured.
func TestFormsShareTheirGuard(t *testing.T) {
	e := newEnv(t, uitest.Options{Spool: t.TempDir()})
	none := uploadEnv(t, t.TempDir(), func(c *ui.Config) { c.Controls, c.Uploads = nil, nil })
	id := e.hold("guard.csv", threeRows, "bob")
	_, tok := e.page()
	_, noneTok := none.page()
	okHash := strings.Repeat("0", 64) + "-" + strings.Repeat("0", 16)
	tests := []struct {
		name string
		env  *env
		path string
		form url.Values
		want int
	}{
		{"approve without token", e, "/batches/" + id + "/approve", url.Values{}, http.StatusForbidden},
		{"discard with another's token", e, "/batches/" + id + "/discard", url.Values{"csrf": {noneTok}, "note": {"n"}}, http.StatusForbidden},
		{"confirm without token", e, "/batches/confirm", url.Values{"hash": {okHash}}, http.StatusForbidden},
		{"approve a bad batch id", e, "/batches/a.b/approve", url.Values{"csrf": {tok}}, http.StatusBadRequest},
		{"discard a bad batch id", e, "/batches/a.b/discard", url.Values{"csrf": {tok}, "note": {"n"}}, http.StatusBadRequest},
		{"confirm a bad hash", e, "/batches/confirm", url.Values{"csrf": {tok}, "hash": {"../x"}}, http.StatusBadRequest},
		{"approve without controls", none, "/batches/" + id + "/approve", url.Values{"csrf": {noneTok}}, http.StatusNotFound},
		{"discard without controls", none, "/batches/" + id + "/discard", url.Values{"csrf": {noneTok}, "note": {"n"}}, http.StatusNotFound},
		{"confirm without uploads", none, "/batches/confirm", url.Values{"csrf": {noneTok}, "hash": {okHash}}, http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if w := tt.env.post(tt.path, tt.form); w.Code != tt.want {
				t.Fatalf("%d, want %d: %s", w.Code, tt.want, w.Body.String())
			}
		})
	}
	if ph := e.phase(id); ph != lifecycle.PhaseAwaiting {
		t.Fatalf("refused forms changed the batch: %s", ph)
	}
}

func TestFourEyesInTheUI(t *testing.T) {
	e := newEnv(t, uitest.Options{FourEyes: true})
	id := e.hold("mine.csv", threeRows, opUser)
	_, tok := e.page()
	w := e.post("/batches/"+id+"/approve", url.Values{"csrf": {tok}, "confirm": {"yes"}})
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "four-eyes") || e.phase(id) != lifecycle.PhaseAwaiting {
		t.Fatalf("approval by the loader: %d %s, phase %s", w.Code, w.Body.String(), e.phase(id))
	}
}

// TestFourEyesWithNamedLogins: one UI, a users file with alice and bob.
// Alice uploads a file that waits for approval; her own Approve is refused
// by four-eyes, Bob's goes through, and the ledger records each by name.
func TestFourEyesWithNamedLogins(t *testing.T) {
	spool := t.TempDir()
	rdb := fakeredis.Working(t)
	h, err := ui.New(uitest.Config(t, rdb, uitest.Options{Users: ui.NamedLogins(t), Spool: spool, ApprovalRequired: true, FourEyes: true}))
	if err != nil {
		t.Fatal(err)
	}
	one := &env{t: t, rdb: rdb, led: ledger.New(rdb), h: h}
	alice, bob := one.as("alice", ui.AlicePass), one.as("bob", ui.BobPass)
	if w := one.as("alice", ui.BobPass).do(httptest.NewRequest("GET", "/batches", nil)); w.Code != http.StatusUnauthorized {
		t.Fatalf("alice with bob's password: %d", w.Code)
	}
	_, aliceTok := alice.page()
	w := alice.upload(aliceTok, "mine.csv", threeRows, nil)
	m := hashRE.FindStringSubmatch(w.Body.String())
	if w.Code != 200 || m == nil {
		t.Fatalf("alice's upload: %d\n%s", w.Code, w.Body.String())
	}
	if w := alice.post("/batches/confirm", url.Values{"csrf": {aliceTok}, "hash": {m[1]}, "choices_mac": {m[2]}}); w.Code != 200 || !strings.Contains(w.Body.String(), "It awaits approval") {
		t.Fatalf("alice's confirm: %d\n%s", w.Code, w.Body.String())
	}
	ids, _ := view.New(one.led.Redis()).BatchIDs(context.Background())
	if len(ids) != 1 {
		t.Fatalf("batches: %v", ids)
	}
	id := ids[0]
	if b, _ := one.led.Batch(context.Background(), id); b.LoadedBy != "alice" || b.Phase != lifecycle.PhaseAwaiting {
		t.Fatalf("uploaded batch: loaded by %q, phase %s", b.LoadedBy, b.Phase)
	}
	w = alice.post("/batches/"+id+"/approve", url.Values{"csrf": {aliceTok}, "confirm": {"yes"}})
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "four-eyes") || one.phase(id) != lifecycle.PhaseAwaiting {
		t.Fatalf("alice approving her own upload: %d %s, phase %s", w.Code, w.Body.String(), one.phase(id))
	}
	// Alice's CSRF token is hers: Bob's browser has its own.
	if w := bob.post("/batches/"+id+"/approve", url.Values{"csrf": {aliceTok}, "confirm": {"yes"}}); w.Code != http.StatusForbidden {
		t.Fatalf("bob with alice's CSRF token: %d", w.Code)
	}
	_, bobTok := bob.page()
	w = bob.post("/batches/"+id+"/approve", url.Values{"csrf": {bobTok}, "confirm": {"yes"}})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "approved by bob") || one.phase(id) != lifecycle.PhaseLoaded {
		t.Fatalf("bob's approval: %d %s, phase %s", w.Code, w.Body.String(), one.phase(id))
	}
	if got := decisions(one.audit(id)); got != "[bob -> loaded]" {
		t.Fatalf("audit of the approval: %v", got)
	}
}

func TestReadOnlyHasNoActions(t *testing.T) {
	rdb := fakeredis.Working(t)
	spool := t.TempDir()
	rw := uitest.Config(t, rdb, uitest.Options{User: opUser, Password: opPass, Spool: spool})
	ro := uitest.Config(t, rdb, uitest.Options{User: opUser, Password: opPass, Spool: spool, ReadOnly: true})
	ui.ShareCSRFKey(&rw, &ro)
	handler := func(cfg ui.Config) *env {
		h, err := ui.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return &env{t: t, rdb: rdb, led: ledger.New(rdb), h: h}
	}
	writable, e := handler(rw), handler(ro)
	id := e.hold("ro.csv", threeRows, "bob")
	body, tok := e.page()
	if tok != "" || strings.Contains(body, "/approve") || strings.Contains(body, "upload") {
		t.Fatalf("read-only page has forms:\n%s", body)
	}
	if !strings.Contains(body, "Awaiting approval") {
		t.Fatalf("read-only page hides the awaiting batch")
	}
	// Even with a valid token of the same user, fetched from the page of
	// a writable UI as a browser would: the refusal is the read-only
	// mode's, not the CSRF check's.
	if _, tok = writable.page(); tok == "" {
		t.Fatal("the writable UI's page has no CSRF token")
	}
	for _, path := range []string{"/batches/" + id + "/approve", "/batches/" + id + "/discard", "/batches/confirm"} {
		w := e.post(path, url.Values{"csrf": {tok}, "note": {"n"}, "hash": {strings.Repeat("0", 64) + "-" + strings.Repeat("0", 16)}})
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "read-only") {
			t.Errorf("%s in read-only with a valid token: %d %s", path, w.Code, w.Body.String())
		}
	}
	if w := e.upload(tok, "ro2.csv", threeRows, nil); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "read-only") {
		t.Errorf("upload in read-only with a valid token: %d %s", w.Code, w.Body.String())
	}
	if e.phase(id) != lifecycle.PhaseAwaiting || len(staged(t, spool)) != 0 {
		t.Fatalf("read-only UI changed the batch or staged an upload: %s, %v", e.phase(id), staged(t, spool))
	}
}

func TestQueuePauseIsAudited(t *testing.T) {
	e := newEnv(t, uitest.Options{NotifyURLs: []string{"https://hooks.example/payout"}})
	if _, err := asynq.NewClientFromRedisClient(e.rdb).Enqueue(asynq.NewTask("withdrawal:create", []byte(`{}`)), asynq.Queue(jobs.Queue)); err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"pause", "resume"} {
		w := e.do(httptest.NewRequest("POST", "/monitoring/api/queues/"+jobs.Queue+":"+action, nil))
		if w.Code >= 300 {
			t.Fatalf("%s: %d %s", action, w.Code, w.Body.String())
		}
	}
	var got []string
	for _, a := range e.audit("") {
		got = append(got, a.Actor+" "+a.To)
		if !strings.Contains(a.Context["note"], "queue "+jobs.Queue) {
			t.Errorf("audit note %q does not name the queue", a.Context["note"])
		}
	}
	if fmt.Sprint(got) != "[alice paused alice resumed]" {
		t.Fatalf("global audit trail: %v", got)
	}
	if n := e.pending(notify.Queue); n != 2 {
		t.Fatalf("%d notifications queued, want 2 (paused, resumed)", n)
	}
}

// upload posts a file to the upload form.
func (e *env) upload(tok, name, content string, fields map[string]string) *httptest.ResponseRecorder {
	e.t.Helper()
	var before []formField
	if tok != "" {
		before = append(before, formField{"csrf", tok})
	}
	for k, v := range fields {
		before = append(before, formField{k, v})
	}
	body, ct := uploadForm(e.t, before, name, content, nil)
	return e.postUpload(bytes.NewReader(body), ct)
}

// formField is one field of a multipart form, in the order it is sent.
type formField struct{ name, value string }

// uploadForm is the multipart body of an upload: the fields before, the
// file, the fields after; and its Content-Type.
func uploadForm(t testing.TB, before []formField, name, content string, after []formField) ([]byte, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, f := range before {
		_ = mw.WriteField(f.name, f.value)
	}
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write([]byte(content))
	for _, f := range after {
		_ = mw.WriteField(f.name, f.value)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return body.Bytes(), mw.FormDataContentType()
}

// postUpload posts body, of Content-Type ct, to the upload form.
func (e *env) postUpload(body io.Reader, ct string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "/batches/upload", body)
	r.Header.Set("Content-Type", ct)
	return e.do(r)
}

// hashRE finds the confirm form's staging id (1) and the MAC binding its
// file choices, none made (2).
var hashRE = regexp.MustCompile(`name="hash" value="([0-9a-f]{64}-[0-9a-f]{16})">\s*<input type="hidden" name="amount_format" value="">\s*<input type="hidden" name="sheet" value="">\s*<input type="hidden" name="choices_mac" value="([^"]+)"`)

func TestUploadPreviewThenConfirm(t *testing.T) {
	spool := t.TempDir()
	e := newEnv(t, uitest.Options{Spool: spool, ApprovalRequired: true})
	_, tok := e.page()
	bad := strings.Replace(threeRows, "UI-2,20,", "UI-2,2O,", 1)
	if w := e.upload("", "pay.csv", bad, nil); w.Code != http.StatusForbidden {
		t.Fatalf("upload without CSRF token: %d", w.Code)
	}
	w := e.upload(tok, "pay.csv", bad, nil)
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, `<td class="n">3</td><td></td><td>amount</td>`) || hashRE.MatchString(body) {
		t.Fatalf("preview of a bad file: %d\n%s", w.Code, body)
	}
	w = e.upload(tok, "pay.csv", threeRows, map[string]string{"expect_rows": "3", "expect_total": "30.51"})
	m := hashRE.FindStringSubmatch(w.Body.String())
	if w.Code != 200 || m == nil || !strings.Contains(w.Body.String(), `id="total">30.51<`) {
		t.Fatalf("preview of a good file: %d\n%s", w.Code, w.Body.String())
	}
	if ids, _ := view.New(e.led.Redis()).BatchIDs(context.Background()); len(ids) != 0 {
		t.Fatalf("a preview loaded something: %v", ids)
	}
	if w := e.post("/batches/confirm", url.Values{"csrf": {tok + "x"}, "hash": {m[1]}, "choices_mac": {m[2]}}); w.Code != http.StatusForbidden {
		t.Fatalf("confirm with a bad token: %d", w.Code)
	}
	w = e.post("/batches/confirm", url.Values{"csrf": {tok}, "hash": {m[1]}, "choices_mac": {m[2]}})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "It awaits approval") {
		t.Fatalf("confirm: %d\n%s", w.Code, w.Body.String())
	}
	if w := e.post("/batches/confirm", url.Values{"csrf": {tok}, "hash": {m[1]}, "choices_mac": {m[2]}}); w.Code != http.StatusConflict {
		t.Fatalf("second confirm: %d", w.Code)
	}
	ids, _ := view.New(e.led.Redis()).BatchIDs(context.Background())
	if len(ids) != 1 {
		t.Fatalf("batches after confirm: %v", ids)
	}
	b, _ := e.led.Batch(context.Background(), ids[0])
	if b.Phase != lifecycle.PhaseAwaiting || b.LoadedBy != opUser || b.Rows != 3 {
		t.Fatalf("confirmed batch: %+v", b)
	}
	for _, p := range []string{"done/pay.csv", "done/pay.csv.ctl"} {
		if _, err := os.Stat(filepath.Join(spool, p)); err != nil {
			t.Errorf("spool: %v", err)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(spool, loader.Staging)); len(left) != 0 {
		t.Errorf("staging not emptied: %v", left)
	}
}

func TestUploadRefusedLoadGoesToFailed(t *testing.T) {
	spool := t.TempDir()
	e := newEnv(t, uitest.Options{Spool: spool})
	_, tok := e.page()
	w := e.upload(tok, "ctl.csv", threeRows, map[string]string{"expect_rows": "4"})
	if w.Code != 200 || hashRE.MatchString(w.Body.String()) || !strings.Contains(w.Body.String(), "control") {
		t.Fatalf("control mismatch preview: %d\n%s", w.Code, w.Body.String())
	}
	if w := e.upload(tok, "notes.txt", threeRows, nil); w.Code != http.StatusConflict {
		t.Fatalf("a .txt upload: %d", w.Code)
	}
	// Loaded meanwhile under another name: the confirm is refused by the
	// loader and the upload ends in failed/ with its errors in outbox/.
	w = e.upload(tok, "late.csv", threeRows, nil)
	m := hashRE.FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("no confirm form:\n%s", w.Body.String())
	}
	e.hold("first.csv", strings.Replace(threeRows, "UI-3,0.01", "UI-3,0.02", 1), "bob")
	w = e.post("/batches/confirm", url.Values{"csrf": {tok}, "hash": {m[1]}, "choices_mac": {m[2]}})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "cannot be loaded") {
		t.Fatalf("confirm of ids taken meanwhile: %d\n%s", w.Code, w.Body.String())
	}
	for _, p := range []string{"failed/late.csv", "outbox/late.csv.errors.csv"} {
		if _, err := os.Stat(filepath.Join(spool, p)); err != nil {
			t.Errorf("spool: %v", err)
		}
	}
	// The console lists the refused file and gives its errors.
	if body := e.get("/refused", 200); !strings.Contains(body, `href="/refused/late.csv"`) {
		t.Errorf("/refused does not list late.csv:\n%s", body)
	}
	if body := e.get("/refused/late.csv", 200); !strings.Contains(body, "file,line,column,message") || !strings.Contains(body, "UI-1") {
		t.Errorf("late.csv's errors:\n%s", body)
	}
	for _, bad := range []string{"/refused/nope.csv", "/refused/%2e%2e", "/refused/..%2f..%2fetc%2fpasswd", "/refused/.hidden"} {
		if w := e.do(httptest.NewRequest("GET", bad, nil)); w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", bad, w.Code)
		}
	}
}

// uploadEnv is an env whose UI takes uploads into spool, changed by set.
func uploadEnv(t *testing.T, spool string, set func(*ui.Config)) *env {
	t.Helper()
	rdb := fakeredis.Working(t)
	cfg := uitest.Config(t, rdb, uitest.Options{User: opUser, Password: opPass, Spool: spool})
	set(&cfg)
	h, err := ui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, rdb: rdb, led: ledger.New(rdb), h: h}
}

// staged lists what the spool's staging directory holds (its hidden
// incoming directories included).
func staged(t *testing.T, spool string) []string {
	t.Helper()
	var out []string
	des, err := os.ReadDir(filepath.Join(spool, loader.Staging))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, d := range des {
		out = append(out, d.Name())
	}
	return out
}

func TestUploadTooLarge(t *testing.T) {
	spool := t.TempDir()
	e := uploadEnv(t, spool, func(c *ui.Config) { c.UploadLimit = int64(len(threeRows)) })
	_, tok := e.page()
	for _, n := range []int{100, 10000} { // within the form's slack, and far over it
		w := e.upload(tok, "big.csv", threeRows+strings.Repeat("UI-9,1,,\n", n), nil)
		if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "too large") {
			t.Fatalf("oversized upload (%d rows): %d %s", n, w.Code, w.Body.String())
		}
		if left := staged(t, spool); len(left) != 0 {
			t.Fatalf("oversized upload (%d rows) left %v staged", n, left)
		}
	}
	if w := e.upload(tok, "exact.csv", threeRows, nil); w.Code != http.StatusOK || len(staged(t, spool)) != 1 {
		t.Fatalf("upload of exactly the limit: %d, staged %v\n%s", w.Code, staged(t, spool), w.Body.String())
	}
}

// The CSRF token is checked before a byte of the file is staged: it must
// come first, as the form sends it.
func TestUploadTokenAfterTheFileRefused(t *testing.T) {
	spool := t.TempDir()
	e := uploadEnv(t, spool, func(*ui.Config) {})
	_, tok := e.page()
	body, ct := uploadForm(t, nil, "late-token.csv", threeRows, []formField{{"csrf", tok}})
	if w := e.postUpload(bytes.NewReader(body), ct); w.Code != http.StatusForbidden || len(staged(t, spool)) != 0 {
		t.Fatalf("token after the file: %d, staged %v", w.Code, staged(t, spool))
	}
}

// TestUploadFieldAfterTheFileRefused: a control total sent after the file
// would go unchecked, so the upload is refused and nothing stays staged.
func TestUploadFieldAfterTheFileRefused(t *testing.T) {
	spool := t.TempDir()
	e := uploadEnv(t, spool, func(*ui.Config) {})
	_, tok := e.page()
	body, ct := uploadForm(t, []formField{{"csrf", tok}}, "late-total.csv", threeRows, []formField{{"expect_total", "1.00"}})
	w := e.postUpload(bytes.NewReader(body), ct)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "expect_total") || len(staged(t, spool)) != 0 {
		t.Fatalf("control total after the file: %d, staged %v\n%s", w.Code, staged(t, spool), w.Body.String())
	}
}

// TestUploadCutOffIsTheClients: a body that breaks off within the file is
// a bad request, not an unavailable ledger, and leaves nothing staged.
func TestUploadCutOffIsTheClients(t *testing.T) {
	spool := t.TempDir()
	e := uploadEnv(t, spool, func(*ui.Config) {})
	_, tok := e.page()
	body, ct := uploadForm(t, []formField{{"csrf", tok}}, "cut.csv", threeRows, nil)
	w := e.postUpload(bytes.NewReader(body[:bytes.Index(body, []byte("UI-2"))]), ct)
	if w.Code != http.StatusBadRequest || strings.Contains(w.Body.String(), "ledger") || len(staged(t, spool)) != 0 {
		t.Fatalf("upload cut off in the file: %d, staged %v\n%s", w.Code, staged(t, spool), w.Body.String())
	}
}

func TestUploadsAtOnceAreBounded(t *testing.T) {
	spool := t.TempDir()
	e := uploadEnv(t, spool, func(c *ui.Config) { c.MaxUploads = 1 })
	_, tok := e.page()
	// A first upload holds the only slot while its body trickles in.
	body, ct := uploadForm(t, []formField{{"csrf", tok}}, "slow.csv", threeRows, nil)
	cut := bytes.Index(body, []byte("UI-2")) // within the file
	pr, pw := io.Pipe()
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- e.postUpload(pr, ct) }()
	// The handler takes its slot before it reads the body: once it has
	// read the start, the slot is held.
	if _, err := pw.Write(body[:cut]); err != nil {
		t.Fatal(err)
	}
	w := e.upload(tok, "second.csv", threeRows, nil)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("upload while the slot is held: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	if _, err := pw.Write(body[cut:]); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	if w := <-first; w.Code != http.StatusOK || !hashRE.MatchString(w.Body.String()) {
		t.Fatalf("slow upload: %d\n%s", w.Code, w.Body.String())
	}
	if w := e.upload(tok, "third.csv", threeRows, nil); w.Code != http.StatusOK {
		t.Fatalf("upload once the slot is free: %d\n%s", w.Code, w.Body.String())
	}
}

// workbook is an .xlsx of rows (first the header), every cell text.
func workbook(t *testing.T, rows [][]string) string {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	for i, row := range rows {
		for j, v := range row {
			cell, _ := excelize.CoordinatesToCellName(j+1, i+1)
			if err := f.SetCellStr("Sheet1", cell, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	buf, err := f.WriteToBuffer()
	if err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestUploadWorkbook(t *testing.T) {
	spool := t.TempDir()
	e := newEnv(t, uitest.Options{Spool: spool})
	_, tok := e.page()
	head := []string{"externalId", "amount", "telecomOperator"}
	w := e.upload(tok, "book.xlsx", workbook(t, [][]string{head, {"X-1", "10.50", "MTS"}, {"X-2", "ten", "MTS"}}), nil)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "<td>Sheet1!B3</td><td>amount</td>") || hashRE.MatchString(w.Body.String()) {
		t.Fatalf("preview of a bad workbook: %d\n%s", w.Code, w.Body.String())
	}
	w = e.upload(tok, "book.xlsx", workbook(t, [][]string{head, {"X-1", "10.50", "MTS"}, {"X-2", "10", "MTS"}}), nil)
	m := hashRE.FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("no confirm for a good workbook:\n%s", w.Body.String())
	}
	w = e.post("/batches/confirm", url.Values{"csrf": {tok}, "hash": {m[1]}, "choices_mac": {m[2]}})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "Handed to the workers") || e.pending(jobs.Queue) != 2 {
		t.Fatalf("confirm of a workbook: %d, %d tasks\n%s", w.Code, e.pending(jobs.Queue), w.Body.String())
	}
	if _, err := os.Stat(filepath.Join(spool, "done", "book.xlsx")); err != nil {
		t.Fatal(err)
	}
}

// TestUploadFileChoices: the upload form's amount format and sheet are
// applied to the preview and shown there, and the confirm loads with the
// same ones: a confirm whose choices were changed after the preview is
// refused and loads nothing.
func TestUploadFileChoices(t *testing.T) {
	e := newEnv(t, uitest.Options{Spool: t.TempDir(), ApprovalRequired: true})
	_, tok := e.page()
	comma := "externalId,amount,cardNumber,telecomOperator\nFC-1,\"1 500,50\",,MTS\nFC-2,\"2,25\",,MTS\n"
	w := e.upload(tok, "comma.csv", comma, map[string]string{"amount_format": "comma", "expect_rows": "2"})
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, `id="total">1,502.75<`) || !strings.Contains(body, `id="format">comma<`) || !strings.Contains(body, `id="control">2 rows<`) {
		t.Fatalf("preview with the comma format: %d\n%s", w.Code, body)
	}
	m := regexp.MustCompile(`name="hash" value="([^"]+)">\s*<input type="hidden" name="amount_format" value="comma">\s*<input type="hidden" name="sheet" value="">\s*<input type="hidden" name="choices_mac" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no confirm form with the choices:\n%s", body)
	}
	if w := e.post("/batches/confirm", url.Values{"csrf": {tok}, "hash": {m[1]}, "amount_format": {"dot-comma"}, "sheet": {""}, "choices_mac": {m[2]}}); w.Code != http.StatusBadRequest {
		t.Fatalf("confirm with another format: %d\n%s", w.Code, w.Body.String())
	}
	if ids, _ := view.New(e.led.Redis()).BatchIDs(context.Background()); len(ids) != 0 {
		t.Fatalf("a refused confirm loaded %v", ids)
	}
	w = e.post("/batches/confirm", url.Values{"csrf": {tok}, "hash": {m[1]}, "amount_format": {"comma"}, "sheet": {""}, "choices_mac": {m[2]}})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "total 1,502.75") {
		t.Fatalf("confirm: %d\n%s", w.Code, w.Body.String())
	}
	w = e.upload(tok, "bad.csv", comma, map[string]string{"amount_format": "roman"})
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "unknown amount format") {
		t.Fatalf("unknown format: %d\n%s", w.Code, w.Body.String())
	}
}
