package bench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/results"
	"github.com/acme/payout/jobs"
)

// simulate loads and processes one batch of RowsPerDay rows per simulated
// day; the batch of day d is archived on day d+ArchiveAfter with the
// archive's clock set to that day (time is faked, not waited for), and
// its completed tasks are deleted on day d+RetentionDays, as Asynq's
// janitor would. used_memory is read after each day's processing (the
// day's high point) and after its archive run. A day is processed by the
// fast path (processFast), after a fidelity check against the real worker,
// or with SimReal by the real worker.
func (m *memRun) simulate(ctx context.Context, rep *MemoryReport) error {
	c := m.cfg
	began := time.Now()
	process := m.processReal
	if !c.SimReal {
		process = m.processFast
		if c.FidelityRows > 0 {
			f, err := m.fidelity(ctx, c.FidelityRows)
			rep.Fidelity = f
			if err != nil {
				return err
			}
		}
	}
	if err := m.rdb.FlushAll(ctx).Err(); err != nil {
		return err
	}
	base := began
	batches := make([]string, c.Days)
	archived := 0
	for d := 0; d < c.Days; d++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		file := filepath.Join(m.dir, fmt.Sprintf("day-%03d.csv", d))
		if err := WriteRows(file, 1+d*c.RowsPerDay, c.RowsPerDay); err != nil {
			return err
		}
		b, err := m.load(ctx, file, c.RowsPerDay)
		if err != nil {
			return fmt.Errorf("day %d: %w", d, err)
		}
		batches[d] = b
		if err := process(ctx, b, c.RowsPerDay); err != nil {
			return fmt.Errorf("day %d: %w", d, err)
		}
		high, err := m.used(ctx)
		if err != nil {
			return err
		}
		rep.SimPeak = max(rep.SimPeak, high)
		if r := d - c.RetentionDays; r >= 0 {
			if err := m.dropTasks(ctx, r, c.RowsPerDay); err != nil {
				return err
			}
		}
		if a := d - c.ArchiveAfter; a >= 0 {
			now := base.Add(time.Duration(d) * 24 * time.Hour)
			// The archive's ledger reads the simulated day as Redis's clock
			// too: the claims sweep never judges by a clock ahead of Redis's.
			led := ledger.New(m.rdb, ledger.WithRedisTime(func() time.Time { return now }))
			out, err := results.Archive(ctx, led, results.ArchiveOptions{Dir: filepath.Join(m.dir, "archive"),
				IDWindow: time.Duration(c.IDWindow) * 24 * time.Hour, Now: func() time.Time { return now }, Batches: []string{batches[a]}})
			if err != nil {
				return fmt.Errorf("day %d: archive: %w", d, err)
			}
			for _, o := range out {
				if o.Skipped == "" {
					archived++
				}
			}
		}
		u, err := m.used(ctx)
		if err != nil {
			return err
		}
		claims, err := ledger.New(m.rdb).Claims().ArchivedClaimsHeld(ctx)
		if err != nil {
			return err
		}
		rep.Sim = append(rep.Sim, SimDay{Day: d + 1, UsedBytes: high, Live: d + 1 - archived, Archived: archived, Claims: claims})
		if (d+1)%10 == 0 || d == 0 {
			m.logf("simulation: day %d: used_memory %s B after processing, %s B after the archive run; %d batches archived, %s of their claims held",
				d+1, thousands(high), thousands(u), archived, thousands(claims))
		}
	}
	rep.SimSeconds = time.Since(began).Seconds()
	return nil
}

// dropTasks deletes the completed create tasks of day d's rows.
func (m *memRun) dropTasks(ctx context.Context, d, n int) error {
	pipe := m.rdb.Pipeline()
	for i := 1 + d*n; i <= (d+1)*n; i++ {
		id := jobs.CreateTaskID(RowAt(i).ExternalID, 1)
		pipe.Del(ctx, asynqKey(jobs.Queue, "t:"+id))
		pipe.ZRem(ctx, asynqKey(jobs.Queue, "completed"), id)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// writeSim prints the simulation and the sizing rule.
func (r *MemoryReport) writeSim(w io.Writer) {
	c := r.Config
	path := "the fast path (ledger transitions and Asynq task moves, no HTTP, no Asynq server)"
	if c.SimReal {
		path = "the real in-process worker and simulator"
	}
	fmt.Fprintf(w, "\nSimulation: %d days of %s rows a day, processed by %s, archive after %d days, id window %d days, completed tasks kept %d days; time faked; %.0f s (fidelity check included)\n",
		c.Days, thousands(int64(c.RowsPerDay)), path, c.ArchiveAfter, c.IDWindow, c.RetentionDays, r.SimSeconds)
	fmt.Fprintf(w, "| day | used_memory after processing | batches live | archived | archived claims held |\n|---|---|---|---|---|\n")
	for _, d := range r.Sim {
		if d.Day%10 == 0 || d.Day == 1 || d.Day == len(r.Sim) {
			fmt.Fprintf(w, "| %d | %s B | %d | %d | %s |\n", d.Day, thousands(d.UsedBytes), d.Live, d.Archived, thousands(d.Claims))
		}
	}
	fmt.Fprintf(w, "peak used_memory: %s B (%.1f MB; MB = 10^6 B, GB = 10^9 B)\n", thousands(r.SimPeak), float64(r.SimPeak)/1e6)
	final, arch := 0.0, 0.0
	for _, p := range r.Phases {
		switch p.Target {
		case TargetFinalBytes:
			final = p.PerPayout
		case TargetArchivedBytes:
			arch = p.PerPayout
		}
	}
	if final == 0 {
		return
	}
	perRow := final*float64(c.ArchiveAfter+1) + arch*float64(c.IDWindow)
	fmt.Fprintf(w, "sizing rule: maxmemory >= N rows/day x (%.0f B x (archive-after days + 1) + %.0f B x id-window days) + 25%% headroom\n", final, arch)
	fmt.Fprintf(w, "  = N x %.0f B x 1.25 with archive-after %dd, id-window %dd: %.1f GB for 100,000 rows a day\n",
		perRow, c.ArchiveAfter, c.IDWindow, perRow*1.25*100_000/1e9)
	if len(r.Sim) > 0 {
		// Archived claims are held for the id window: at most IDWindow
		// days of archived batches count.
		pred := float64(r.EmptyBytes) + float64(c.RowsPerDay)*(final*float64(min(c.ArchiveAfter+1, c.Days))+arch*float64(min(max(0, c.Days-c.ArchiveAfter-1), c.IDWindow)))
		fmt.Fprintf(w, "  the rule (without headroom) predicts %.1f MB for this simulation's last day; measured peak %.1f MB\n", pred/1e6, float64(r.SimPeak)/1e6)
	}
}
