package chaos

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestFlakyProxy: every request the proxy answers without a fault is the
// upstream's answer; the faults it counts are the requests that ended
// otherwise, and an answer it lost may still have reached the upstream.
func TestFlakyProxy(t *testing.T) {
	var upstream atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstream.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"b1"}`)
	}))
	defer up.Close()
	p, err := NewFlakyProxy(7, up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ok, n := 0, 200
	for range n {
		resp, err := http.Post(p.URL()+"/api/v1/batches", "application/json", nil)
		if err != nil {
			continue // an answer lost
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusCreated {
			ok++
		}
	}
	requests, faults := p.Stats()
	if requests != n || ok+faults != n || faults == 0 || ok == 0 {
		t.Fatalf("requests %d, ok %d, faults %d; want %d requests, each ok or a fault, some of both", requests, ok, faults, n)
	}
	if got := int(upstream.Load()); got <= ok || got >= n {
		t.Fatalf("upstream saw %d requests; want more than the %d answered (lost answers) and fewer than %d (refused)", got, ok, n)
	}
}

func TestAPIBody(t *testing.T) {
	files := Generate(rand.New(rand.NewPCG(1, 2)), "t", 400, 1)
	b, err := apiBody(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Name        string
		ExpectRows  int
		ExpectTotal string
		Items       []struct {
			ExternalID  string
			Amount      string
			Destination map[string]string
		}
	}
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	if req.Name+".csv" != files[0].Name || req.ExpectRows != 400 || len(req.Items) != 400 || req.ExpectTotal == "" {
		t.Fatalf("request: %s, %d rows, %d items, total %q", req.Name, req.ExpectRows, len(req.Items), req.ExpectTotal)
	}
	for i, it := range req.Items {
		r := files[0].Rows[i]
		if it.ExternalID != r.ExternalID || it.Amount != r.AmountText || len(it.Destination) != 1 ||
			(r.Card != "" && it.Destination["cardNumber"] != r.CardText) || (r.Card == "" && it.Destination["telecomOperator"] != r.Telecom) {
			t.Fatalf("item %d: %+v for row %+v", i, it, r)
		}
	}
}
