package ui

// ShareCSRFKey makes the UIs New builds from cfgs issue and accept the
// same CSRF tokens, as if they were one process: a token fetched from one
// is valid in the others.
func ShareCSRFKey(cfgs ...*Config) {
	k := newCSRFTokens()
	for _, c := range cfgs {
		c.csrf = k
	}
}
