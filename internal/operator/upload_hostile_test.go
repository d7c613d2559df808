package operator

import (
	"bytes"
	"context"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/payout/internal/queue"
	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/proof/testenv/fakeredis"
	"github.com/acme/payout/internal/proof/testenv/hostile"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/internal/vault"
)

// peakHeap samples the heap in use until stop, and returns its peak.
func peakHeap(stop <-chan struct{}) func() uint64 {
	var peak atomic.Uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64() + s[1].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { wg.Wait(); return peak.Load() }
}

// TestUploadRefusesHostileWorkbooks: the UI's upload (UIUploads.Preview,
// which the upload handler streams the request into) refuses every hostile
// workbook with its reason, within 256 MiB of heap and in bounded time.
func TestUploadRefusesHostileWorkbooks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 300 MB zip bombs")
	}
	if raceEnabled {
		// The race detector slows the XML reader tenfold, and the
		// figures would be the detector's: make test runs this test
		// again without -race.
		t.Skip("memory and time are not measured under -race; make test runs this test without it")
	}
	rdb := fakeredis.Working(t)
	ld := loader.New(ledger.New(rdb), queue.New(rdb), vault.Ephemeral(), zerolog.Nop())
	u := UIUploads{Loader: ld, Spool: t.TempDir()}
	ctx := asPerson(context.Background(), "alice")
	preview := func(t *testing.T, name string, data []byte) (ui.Preview, uint64, time.Duration) {
		runtime.GC()
		stop := make(chan struct{})
		peak := peakHeap(stop)
		start := time.Now()
		p, err := u.Preview(ctx, ui.Upload{Name: name + ".xlsx", File: bytes.NewReader(data), By: "alice"})
		took := time.Since(start)
		close(stop)
		if err != nil {
			t.Fatalf("preview: %v", err)
		}
		return p, peak(), took
	}
	p, _, _ := preview(t, "good", hostile.Good())
	if !p.Acceptable || p.Rows != 1 || p.SheetRead != "Sheet1" || p.Shown != 1 {
		t.Fatalf("a good workbook: %+v", p)
	}
	for _, c := range hostile.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			p, peak, took := preview(t, c.Name, c.Data)
			t.Logf("%s: %d bytes: peak heap %.1f MiB in %v", c.Name, len(c.Data), float64(peak)/(1<<20), took.Round(time.Millisecond))
			var msgs []string
			for _, e := range p.Errors {
				msgs = append(msgs, e.Message)
			}
			if p.Acceptable || !strings.Contains(strings.Join(msgs, "\n"), c.Want) {
				t.Errorf("want a refusal saying %q: %+v", c.Want, p)
			}
			if peak > 256<<20 {
				t.Errorf("peak heap %.1f MiB, over 256 MiB", float64(peak)/(1<<20))
			}
			if took > 2*time.Minute {
				t.Errorf("took %v", took)
			}
		})
	}
}
