//go:build integration

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/e2e/apiclient"
	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/gobuild"
	"github.com/acme/payout/internal/proof/testenv/proc"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/vault"
	"github.com/rs/zerolog"
)

// TestAPIEndToEnd drives the whole flow of issue 41 through a client
// generated from docs/openapi.yaml (oapi-codegen) against the real binary
// (payout api, payout worker), a real Redis and the PSP simulator: create
// with a key, retry the same key, list with paging to the end, approve as
// a second identity (four-eyes), follow to final, download.
func TestAPIEndToEnd(t *testing.T) {
	bin := gobuild.Binary(t, "github.com/acme/payout/cmd/payout")
	redisURL := redistest.StartConfig(t, redistest.Config{AOF: true}).URL()
	psp := httptest.NewServer(sandbox.New(sandbox.DefaultConfig(), zerolog.Nop()).Handler())
	t.Cleanup(psp.Close)
	key, err := vault.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.CleanEnv("PAYOUT_DATA_KEY="+key, "PAYOUT_PSP_TOKEN="+sandbox.DefaultToken)
	token := func(name, role string) string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		u, p, err := proc.Run(ctx, proc.Spec{Name: "payout token", Bin: bin, Env: env,
			Args: []string{"token", "create", name, "--role", role, "--redis", redisURL, "--log-level", "error"}})
		stdout, stderr := p.Output()
		if err != nil || u.ExitCode != 0 {
			t.Fatalf("token create %s: %v exit %d\n%s", name, err, u.ExitCode, stderr)
		}
		return strings.TrimSpace(stdout)
	}
	erp, boss := token("erp", "maker"), token("treasury", "approver")
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.Port(t))
	start(t, bin, env, "payout api", "api", "--redis", redisURL, "--addr", addr, "--approval", "required", "--four-eyes", "--log-level", "error")
	start(t, bin, env, "payout worker", "worker", "--redis", redisURL, "--psp-url", psp.URL, "--metrics-addr", "", "--track-outcome=false", "--log-level", "error")
	base := "http://" + addr
	waitUp(t, base+"/api/v1/openapi.json")

	ctx := context.Background()
	asERP, asBoss := client(t, base, erp), client(t, base, boss)
	items := make([]apiclient.Item, 5)
	for i := range items {
		c := "4111 1111 1111 1111"
		items[i] = apiclient.Item{ExternalId: fmt.Sprintf("E2E-%d", i), Amount: fmt.Sprintf("%d.25", 10+i), Destination: apiclient.Destination{CardNumber: &c}}
	}
	body := apiclient.CreateBatchJSONRequestBody{Items: items}
	created, err := asERP.CreateBatchWithResponse(ctx, &apiclient.CreateBatchParams{IdempotencyKey: "e2e-create"}, body)
	if err != nil || created.JSON201 == nil {
		t.Fatalf("create: %v %d %s", err, created.StatusCode(), created.Body)
	}
	b := *created.JSON201
	again, err := asERP.CreateBatchWithResponse(ctx, &apiclient.CreateBatchParams{IdempotencyKey: "e2e-create"}, body)
	if err != nil || again.JSON201 == nil || again.JSON201.Id != b.Id || again.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry with the same key: %v %d %s", err, again.StatusCode(), again.Body)
	}
	if b.Phase != "awaiting_approval" {
		t.Fatalf("phase %q, want awaiting_approval", b.Phase)
	}

	// Paging to the end, two payouts a page.
	var ids []string
	limit := 2
	params := &apiclient.ListPayoutsParams{Limit: &limit}
	for {
		page, err := asERP.ListPayoutsWithResponse(ctx, b.Id, params)
		if err != nil || page.JSON200 == nil {
			t.Fatalf("payouts: %v %s", err, page.Body)
		}
		for _, p := range page.JSON200.Items {
			ids = append(ids, p.ExternalId)
			if p.Destination != "card 411111******1111" {
				t.Fatalf("destination %q not masked", p.Destination)
			}
		}
		if page.JSON200.Next == nil {
			break
		}
		u, _ := url.Parse(*page.JSON200.Next)
		after := u.Query().Get("after")
		params.After = &after
	}
	if len(ids) != 5 {
		t.Fatalf("paged %v, want 5 payouts", ids)
	}

	// Four-eyes: the creator's token may not approve (not its role), the approver may.
	if r, _ := asERP.ApproveBatchWithResponse(ctx, b.Id, &apiclient.ApproveBatchParams{IdempotencyKey: "e2e-approve-erp"}, apiclient.ApproveBatchJSONRequestBody{}); r.StatusCode() != http.StatusForbidden {
		t.Fatalf("approve by the maker: %d %s", r.StatusCode(), r.Body)
	}
	note := "checked"
	ok, err := asBoss.ApproveBatchWithResponse(ctx, b.Id, &apiclient.ApproveBatchParams{IdempotencyKey: "e2e-approve"}, apiclient.ApproveBatchJSONRequestBody{Note: &note})
	if err != nil || ok.JSON200 == nil || !strings.Contains(ok.JSON200.Message, "approved by token:treasury") {
		t.Fatalf("approve: %v %s", err, ok.Body)
	}

	err = testenv.Poll(ctx, 2*time.Minute, 200*time.Millisecond, func() (bool, error) {
		got, err := asERP.GetBatchWithResponse(ctx, b.Id)
		if err != nil || got.JSON200 == nil {
			return false, fmt.Errorf("get: %v", err)
		}
		return got.JSON200.Phase == "finished", nil
	})
	if err != nil {
		t.Fatalf("the batch did not finish: %v", err)
	}
	res, err := asERP.DownloadBatchFileWithResponse(ctx, b.Id, apiclient.ResultCsv)
	if err != nil || res.StatusCode() != 200 || strings.Count(string(res.Body), "E2E-") != 5 || strings.Contains(string(res.Body), "4111111111111111") {
		t.Fatalf("result.csv: %v %d\n%s", err, res.StatusCode(), res.Body)
	}
}

// client is a generated client sending token.
func client(t *testing.T, base, token string) *apiclient.ClientWithResponses {
	t.Helper()
	c, err := apiclient.NewClientWithResponses(base, apiclient.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// start runs the binary with args until the test ends.
func start(t *testing.T, bin string, env []string, name string, args ...string) {
	t.Helper()
	p, err := proc.Start(proc.Spec{Name: name, Bin: bin, Args: args, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = p.Stop(10 * time.Second)
		if t.Failed() {
			out, errs := p.Output()
			t.Logf("%s:\n%s%s", name, out, errs)
		}
	})
}

// waitUp polls url until it answers 200.
func waitUp(t *testing.T, url string) {
	t.Helper()
	err := testenv.Poll(context.Background(), 30*time.Second, 100*time.Millisecond, func() (bool, error) {
		r, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		defer r.Body.Close()
		_, _ = io.Copy(io.Discard, r.Body)
		return r.StatusCode == 200, nil
	})
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}
