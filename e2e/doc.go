// Package e2e holds the end-to-end tests that drive a real browser
// (headless Chromium through chromedp) against the web UI. It is a module
// of its own so that the product's go.mod does not list the browser
// tooling; it uses the product through a replace directive, and the
// product's internal packages by the path rule (github.com/acme/payout/e2e
// is inside github.com/acme/payout).
//
// Run with `cd e2e && go test -tags integration ./...` (make
// test-integration does).
package e2e
