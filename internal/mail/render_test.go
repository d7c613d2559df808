package mail

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv/golden"
)

// fullCard is a Luhn-valid card number that no mail may show.
const fullCard = "4111111111111111"

var loadedAt = time.Date(2026, 12, 2, 9, 30, 0, 0, time.UTC)

func approvalFixture() BatchFigures {
	return BatchFigures{Batch: "b3f1c2", File: "payroll-2026-12.csv", LoadedBy: "alice", LoadedAt: loadedAt, Rows: 3,
		Total: "1250.50", Reason: "approval required (four-eyes); card 4111 1111 1111 1111 named in a note", FourEyes: true,
		Link: "https://payout.example.com/batches/b3f1c2/approve"}
}

func finalFixture() BatchFigures {
	f := approvalFixture()
	f.Reason, f.FourEyes, f.Link = "", false, "https://payout.example.com/batches/b3f1c2"
	f.States = []StateFigure{{"paid", 2, "1000.00"}, {"failed", 1, "250.50"}}
	return f
}

func digestFixture() Digest {
	return Digest{Link: "https://payout.example.com/queue", More: 3, Lines: []ReviewLine{
		{Batch: "b3f1c2", File: "payroll-2026-12.csv", ExternalID: "PO-1", Amount: "10.50", Destination: "card 411111******1111",
			Reason: "no answer from the PSP after 20 status checks", Link: "https://payout.example.com/batches/b3f1c2/payouts/PO-1"},
		{Batch: "b3f1c2", File: "payroll-2026-12.csv", ExternalID: "PO-2", Amount: "0.07", Destination: "telecom MTS",
			Reason: "PSP said: card " + fullCard + " blocked", Link: "https://payout.example.com/batches/b3f1c2/payouts/PO-2"},
	}}
}

func endpointFixture() EndpointFailure {
	return EndpointFailure{Endpoint: "https://hooks.example.com/payout", Episode: "1", Failures: 12, Since: loadedAt,
		LastError: "HTTP 503", Link: "https://payout.example.com/webhooks/1"}
}

// TestRender: each mail's text and HTML against its golden file; amounts
// keep their decimals and no card number is shown whole.
func TestRender(t *testing.T) {
	cases := []struct {
		name   string
		render func() (Message, error)
		want   []string // in the text and the HTML
	}{
		{"approval", func() (Message, error) { return RenderApproval(approvalFixture()) }, []string{"1250.50", "/batches/b3f1c2/approve", "cannot approve"}},
		{"final", func() (Message, error) { return RenderFinal(finalFixture()) }, []string{"1250.50", "1000.00", "250.50", "/batches/b3f1c2"}},
		{"digest", func() (Message, error) { return RenderDigest(digestFixture()) }, []string{"10.50", "0.07", "411111******1111", "/queue", "3 more"}},
		{"endpoint", func() (Message, error) { return RenderEndpoint(endpointFixture()) }, []string{"hooks.example.com", "12", "HTTP 503"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.render()
			if err != nil {
				t.Fatal(err)
			}
			golden.CheckString(t, filepath.Join("testdata", tc.name+".txt"), "Subject: "+m.Subject+"\n\n"+m.Text)
			golden.CheckString(t, filepath.Join("testdata", tc.name+".html"), m.HTML)
			for _, body := range []string{m.Text, m.HTML} {
				for _, w := range tc.want {
					if !strings.Contains(body, w) {
						t.Errorf("%q missing from\n%s", w, body)
					}
				}
				if strings.Contains(strings.ReplaceAll(body, " ", ""), fullCard) || strings.Contains(m.Subject, fullCard) {
					t.Errorf("a full card number in\n%s", body)
				}
			}
		})
	}
}

// TestRenderEscapesHTML: what people typed cannot make markup.
func TestRenderEscapesHTML(t *testing.T) {
	f := approvalFixture()
	f.File = `<script>alert(1)</script>.csv`
	m, err := RenderApproval(f)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m.HTML, "<script>") || !strings.Contains(m.HTML, "&lt;script&gt;") {
		t.Fatalf("not escaped:\n%s", m.HTML)
	}
}
