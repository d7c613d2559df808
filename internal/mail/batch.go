package mail

import (
	"context"
	"errors"
	netmail "net/mail"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/view"
)

// figures reads batch id's figures, or reports (nil error, ok false) a
// batch that is gone: nothing to tell any more.
func (m *Mailer) figures(ctx context.Context, id string) (view.BatchStatus, bool, error) {
	st, err := m.view.Status(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		m.cfg.Logger.Warn().Str("batch", id).Msg("batch gone (discarded or archived): no mail")
		return st, false, nil
	}
	return st, err == nil, err
}

// Figures is what the mails say about a batch: its file, totals and
// link; with perState, its rows and amount per state.
func Figures(st view.BatchStatus, link string, perState bool) BatchFigures {
	b := st.Batch
	f := BatchFigures{Batch: b.ID, File: b.File, LoadedBy: b.LoadedBy, LoadedAt: b.LoadedAt, Rows: b.Rows,
		Total: b.Total.StringFixed(b.Scale), Reason: b.WaitReason, FourEyes: b.FourEyes, Link: link}
	if !perState {
		return f
	}
	for _, s := range lifecycle.States {
		if n := st.Counts.Rows[s]; n > 0 {
			f.States = append(f.States, StateFigure{State: s.Label(), Rows: n, Amount: st.Counts.Amount(s, b.Scale).StringFixed(b.Scale)})
		}
	}
	return f
}

// approval mails the approvers of the batch's rule; under four-eyes the
// person who loaded it (who cannot approve it) is left out.
func (m *Mailer) approval(ctx context.Context, ev eventTask) error {
	st, ok, err := m.figures(ctx, ev.Batch)
	if !ok {
		return err
	}
	if st.Phase != lifecycle.PhaseAwaiting {
		m.cfg.Logger.Info().Str("batch", ev.Batch).Str("phase", st.Phase).Msg("batch no longer awaits approval: no mail")
		return nil
	}
	f := Figures(st, m.link(batchPath(st.ID)+"/approve"), false)
	if f.Reason == "" {
		f.Reason = ev.Reason
	}
	msg, err := RenderApproval(f)
	if err != nil {
		return err
	}
	role := m.cfg.ApproverRole(st.Batch)
	to := m.cfg.Recipients.Role(role)
	if st.FourEyes {
		to = Without(to, m.cfg.Recipients.Person(st.LoadedBy))
	}
	return m.sendAll(ctx, ev.ID, to, msg, "role "+role)
}

// final mails the maker of a final batch: their person line, else the
// role maker.
func (m *Mailer) final(ctx context.Context, ev eventTask) error {
	st, ok, err := m.figures(ctx, ev.Batch)
	if !ok {
		return err
	}
	msg, err := RenderFinal(Figures(st, m.link(batchPath(st.ID)), true))
	if err != nil {
		return err
	}
	to, who := m.cfg.Recipients.Role(RoleMaker), "role "+RoleMaker
	if a := m.cfg.Recipients.Person(st.LoadedBy); a != nil {
		to, who = []*netmail.Address{a}, "person "+st.LoadedBy
	}
	return m.sendAll(ctx, ev.ID, to, msg, who)
}
