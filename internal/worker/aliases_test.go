package worker

import (
	"strconv"

	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
)

type (
	psp_WithdrawalRequest = psp.WithdrawalRequest
	psp_Result            = psp.Result
	psp_Property          = psp.Property
)

func mustAmount(s string) money.Amount { return money.MustParse(s) }
func itoa(n int) string                { return strconv.Itoa(n) }
