package operator

// SeedReview is seedReview for the external tests (commands_test.go).
var SeedReview = seedReview
